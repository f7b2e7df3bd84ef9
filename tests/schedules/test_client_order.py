"""A schedule's changes sent one after another run in that order, even within one millisecond
(tasks due together run in key order) and under a stepped clock."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

from scheduler.model import Task
from scheduler.schedules import Schedule, Time
from scheduler.schedules.abc import ScheduleRecord
from scheduler.schedules.client import SchedulesClient
from scheduler.stores.schedules_sqlite import SqliteScheduleStore


class Recording:
    def __init__(self) -> None:
        self.sent: list[Task] = []

    def schedule_task(self, task: Task) -> Future[None]:
        self.sent.append(task)
        done: Future[None] = Future()
        done.set_result(None)
        return done


def test_changes_sent_at_one_stepped_instant_run_in_the_order_they_were_sent(
    tmp_path: Path,
) -> None:
    store = SqliteScheduleStore(path=str(tmp_path / "s.db"))
    store.open()
    schedule = Schedule(name="clean", program="clean", trigger=Time(cron="5 * * * *"))
    store.put(ScheduleRecord(schedule, 1))
    recording = Recording()
    client = SchedulesClient(store=store, client=recording, clock=lambda: 0, wait_s=None)  # type: ignore[arg-type]
    for hour in range(100):
        client.update("clean", {"description": f"hour {hour}"})
    store.close()
    in_run_order = sorted(recording.sent, key=lambda t: t.key)
    assert [t.data["schedule"]["description"] for t in in_run_order] == [
        f"hour {hour}" for hour in range(100)
    ]
