"""A worker whose store refuses one partition's batches, on each log: the partition is paused
(the log's own `pause`), its records wait, the others run on, and once the store takes writes
again every task of it runs once, in key order, and its offsets are committed to the end."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler import SchedulerClient, Task
from scheduler.logs.abc import TaskLog
from scheduler.partitioning import partition_for
from scheduler.stores.sqlite import SqliteTaskStore
from scheduler.testing import TEST_SETTINGS
from scheduler.worker import Worker
from tests.contracts.conftest import LOG_PARTITIONS, _make_log
from tests.engine.flaky import FlakyStore
from tests.engine.helpers import Recorder

DOWN, UP = 1, 2


def ordering_id_on(partition: int) -> str:
    i = 0
    while partition_for(f"oid-{i}".encode(), LOG_PARTITIONS) != partition:
        i += 1
    return f"oid-{i}"


def until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not there in time"
        threading.Event().wait(0.05)


@pytest.mark.parametrize("kind", ["embedded", pytest.param("kafka", marks=pytest.mark.kafka)])
def test_a_partition_whose_store_refuses_waits_paused_then_runs_everything_once_in_order(
    kind: str, tmp_path: Path
) -> None:
    refusing = threading.Event()
    refusing.set()
    store = SqliteTaskStore(path=str(tmp_path / "store.db"))
    store.open(create_schema=True)
    flaky = FlakyStore(store)
    flaky.unavailable = True
    flaky.should_fail = lambda method, p: (
        method == "write_tasks" and p == DOWN and refusing.is_set()
    )
    recorder = Recorder()
    log: TaskLog
    with _make_log(kind, tmp_path, create_topic=True) as log:
        worker = Worker(
            log=log, store=flaky, executor=recorder, settings=TEST_SETTINGS, group_id=f"g-{kind}"
        )
        client = SchedulerClient(log=log)
        worker.start()
        try:
            assert worker.wait_until_assigned(60)
            down, up = ordering_id_on(DOWN), ordering_id_on(UP)
            due = datetime.now(UTC) + timedelta(seconds=1)
            first = [Task(down, due + timedelta(milliseconds=k), f"k{k:02}") for k in range(10)]
            others = [Task(up, due + timedelta(milliseconds=k), f"k{k:02}") for k in range(10)]
            for future in [client.schedule_task(task) for task in first + others]:
                future.result(timeout=30)
            until(lambda: set(recorder.keys()) >= {task.key for task in others})
            until(lambda: DOWN in worker.health().persist_failing)
            later = [Task(down, due + timedelta(milliseconds=k), f"k{k:02}") for k in range(10, 15)]
            for future in [client.schedule_task(task) for task in later]:
                future.result(timeout=30)
            threading.Event().wait(1.0)
            assert recorder.runs_of(down) == []  # paused: nothing of it stored, nothing ran

            refusing.clear()
            until(lambda: len(recorder.runs_of(down)) >= 15)
            until(lambda: worker.consumer_lag().get(DOWN) == 0)
            assert worker.failures() == []
            assert worker.health().persist_failing == {}
        finally:
            client.close()
            worker.stop(60)
            store.close()
    assert recorder.runs_of(down) == [task.key for task in first + later]  # once each, in order
    assert sorted(recorder.runs_of(up)) == [task.key for task in others]
