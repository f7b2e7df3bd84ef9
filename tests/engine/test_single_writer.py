"""TaskPersistence is the single writer of a partition's rows: statuses and operators' changes go
through one buffer, in the order they were recorded."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pykka
import pytest

from scheduler import Task, TaskState
from scheduler.actors.context import PartitionContext
from scheduler.actors.task_persistence import TaskPersistence
from scheduler.codec import Command, Op
from scheduler.engine.timers import TimerService
from scheduler.model import TaskKey, TaskStatus
from scheduler.stores.sqlite import SqliteTaskStore
from scheduler.testing import TEST_SETTINGS

PARTITION = 0


class QuietExecutor(pykka.ThreadingActor):
    """Stands in for the PartitionExecutor: takes what TaskPersistence tells it, runs nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled: list[TaskKey] = []

    def cancel(self, keys: list[TaskKey]) -> None:
        self.cancelled += keys

    def schedule(self, items: object, arrived: object = ()) -> None:
        pass

    def await_keys(self, keys: object) -> None:
        pass

    def store_outage(self, what: str, down: bool) -> None:
        pass

    def notify_when_at_most(self, threshold: int) -> None:
        pass


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[pykka.ActorProxy[TaskPersistence], PartitionContext]]:
    store = SqliteTaskStore(path=str(tmp_path / "store.db"))
    store.open(create_schema=True)
    ctx = PartitionContext(
        partition=PARTITION,
        generation=1,
        store=store,
        executor=None,  # type: ignore[arg-type]
        executor_service=None,  # type: ignore[arg-type]
        timers=TimerService(),
        settings=TEST_SETTINGS,
        report_failure=lambda *failure: None,
    )
    executor = QuietExecutor.start()
    persistence = TaskPersistence.start(ctx, executor.proxy())
    try:
        yield persistence.proxy(), ctx
    finally:
        persistence.stop()
        executor.stop()
        ctx.timers.stop()
        store.close()


def test_an_operators_cancel_is_not_overwritten_by_a_running_status_waiting_to_be_flushed(
    writer: tuple[pykka.ActorProxy[TaskPersistence], PartitionContext],
) -> None:
    persistence, ctx = writer
    task = Task("o", datetime.now(UTC) + timedelta(seconds=1), "k")
    persistence.persist([Command(Op.SCHEDULE, task)], 0).get(timeout=10)
    # The attempt's start, recorded by the executor and not written yet.
    ctx.unflushed.put([TaskStatus(task.key, TaskState.RUNNING, 1, updated_ms=1)])

    cancel = Command(Op.CANCEL, Task.from_key(task.key, {}))
    persistence.persist([cancel], 1).get(timeout=10)
    persistence.flush().get(timeout=10)  # the flush the RUNNING was waiting for

    status = ctx.store.fetch_statuses(PARTITION, [task.key])[task.key]
    assert status.state is TaskState.CANCELLED
    assert len(ctx.unflushed) == 0


def test_a_drop_of_a_failure_waiting_to_be_flushed_is_not_undone_by_the_flush(
    writer: tuple[pykka.ActorProxy[TaskPersistence], PartitionContext],
) -> None:
    persistence, ctx = writer
    key = Task("o", datetime.now(UTC), "k").key
    ctx.unflushed.put([TaskStatus(key, TaskState.FAILED, 3, "boom", updated_ms=1)])

    persistence.persist([Command(Op.DROP, Task.from_key(key, {}))], 0).get(timeout=10)
    persistence.flush().get(timeout=10)

    assert ctx.store.fetch_statuses(PARTITION, [key]) == {}


def test_status_changes_waiting_when_a_batch_is_persisted_are_written_with_its_rows(
    writer: tuple[pykka.ActorProxy[TaskPersistence], PartitionContext],
) -> None:
    persistence, ctx = writer
    done = Task("o", datetime.now(UTC), "done")
    ctx.unflushed.put([TaskStatus(done.key, TaskState.SUCCEEDED, 1, updated_ms=1)])
    later = Task("o", datetime.now(UTC) + timedelta(hours=1), "later")

    persistence.persist([Command(Op.SCHEDULE, later)], 0).get(timeout=10)  # no flush asked

    assert ctx.store.fetch_statuses(PARTITION, [done.key])[done.key].state is TaskState.SUCCEEDED
    assert [row.task.key for row in ctx.store.load_keys(PARTITION, [later.key])] == [later.key]
    assert len(ctx.unflushed) == 0
