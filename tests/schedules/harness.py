"""A schedule's queue driven by hand, with a clock the test steps: the `schedules` executor over
SQLite stores, a client that records the tasks it enqueues, and a loop that runs the due tasks
of the schedule queues in key order, as the engine would."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.model import Task, TaskKey
from scheduler.programs.launch import requests_of
from scheduler.programs.model import Run, RunStatus, StartedBy, StarterKind, run_id_for
from scheduler.schedules.abc import ScheduleRecord
from scheduler.schedules.executor import ScheduleExecutor
from scheduler.schedules.model import Schedule
from scheduler.schedules.tasks import change_task
from scheduler.stores.runs_sqlite import SqliteRunStore
from scheduler.stores.schedules_sqlite import SqliteScheduleStore

T0 = 1_767_225_600_000
"""2026-01-01T00:00:00Z."""


@dataclass
class Clock:
    now: int = T0

    def __call__(self) -> int:
        return self.now


@dataclass
class RecordingClient:
    """Stands for `SchedulerClient`: keeps the pending tasks by key (a key enqueued again
    replaces its data; a completed key never runs again)."""

    pending: dict[TaskKey, Task] = field(default_factory=dict)
    done: set[TaskKey] = field(default_factory=set)
    launches: list[Task] = field(default_factory=list)

    def schedule_task(self, task: Task) -> Future[int]:
        if task.ordering_id.startswith("program:"):
            self.launches.append(task)
        elif task.key not in self.done:
            self.pending[task.key] = task
        future: Future[int] = Future()
        future.set_result(0)
        return future

    def schedule_tasks(self, tasks: Iterable[Task]) -> Future[int]:
        """As `schedule_task` for each; a tick's `launch-many` batch is recorded as the launch
        task of each of its requests."""
        for task in tasks:
            if task.data.get("op") == "launch-many":
                self.launches.extend(request.task() for request in requests_of(task))
            else:
                self.schedule_task(task)
        future: Future[int] = Future()
        future.set_result(0)
        return future


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = Clock()
        self.client = RecordingClient()
        self.store = SqliteScheduleStore(path=str(tmp_path / "store.db"))
        self.store.open()
        self.runs = SqliteRunStore(path=str(tmp_path / "store.db"))
        self.runs.open()
        self.executor = ScheduleExecutor(
            store=self.store,
            runs=self.runs,
            client=self.client,  # type: ignore[arg-type]
            clock=self.clock,
        )
        self.changes = 0

    def close(self) -> None:
        self.store.close()
        self.runs.close()

    def change(self, name: str, action: str, schedule: Schedule | None = None) -> None:
        self.changes += 1
        data = {} if schedule is None else {"schedule": schedule.to_json()}
        self.client.schedule_task(
            change_task(name, self.clock.now, f"c{self.changes}", action, **data)
        )
        self.run_due()

    def create_enabled(self, schedule: Schedule) -> None:
        self.change(schedule.name, "create", schedule)
        self.change(schedule.name, "enable")

    def record(self, name: str) -> ScheduleRecord:
        record = self.store.get(name)
        assert record is not None
        return record

    def deliver(self, name: str, event: dict, *, run_ended: bool = False, at: int | None = None):
        key = TaskKey.from_ms(f"schedule:{name}", at or self.clock.now, f"events/0/{self.changes}")
        self.changes += 1
        self.client.schedule_task(
            Task.from_key(
                key,
                {"executor": "schedules", "op": "event", "event": event, "run_ended": run_ended},
            )
        )
        self.run_due()

    def run_due(self) -> list[Task]:
        """Run every due schedule task, in key order, until none is due."""
        ran: list[Task] = []
        while True:
            due = sorted(
                (k for k in self.client.pending if k.scheduled_ms <= self.clock.now),
                key=lambda k: (k.scheduled_ms, k.ordering_id, k.uniqueness_key),
            )
            if not due:
                return ran
            task = self.client.pending.pop(due[0])
            self.executor.handle(task)
            self.client.done.add(task.key)
            ran.append(task)

    def advance_to(self, at_ms: int) -> list[Task]:
        """Step the clock from task to task up to `at_ms`, running each when due."""
        ran: list[Task] = []
        while True:
            times = sorted(k.scheduled_ms for k in self.client.pending if k.scheduled_ms <= at_ms)
            step = times[0] if times else at_ms
            self.clock.now = max(self.clock.now, step)
            ran += self.run_due()
            if not times:
                return ran

    def start_run(self, program: str, request: str, status: RunStatus = RunStatus.RUNNING) -> Run:
        """A run of `program` (by an operator), in the run store."""
        run = Run(
            run_id=run_id_for(program, request),
            program=program,
            started_by=StartedBy(StarterKind.OPERATOR, "ann"),
            arguments={},
            status=status,
            created_ms=self.clock.now,
            requested_ms=self.clock.now,
            request_key=request,
        )
        return self.runs.create(run)
