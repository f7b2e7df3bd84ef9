"""A partition's next owner starts reading the store at the committed reload mark, not at the
first row: completed tasks before it (Cassandra tombstones) are not read again, and no task
that may still run is skipped, a straggler or a row written behind the mark included."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from scheduler import Task, worker
from scheduler.actors import task_persistence, throughput_controller
from scheduler.engine.reload_mark import ReloadMark
from scheduler.model import from_epoch_ms
from scheduler.stores.abc import TaskStore
from scheduler.testing import embedded_engine
from tests.engine.helpers import Recorder, soon
from tests.engine.test_failures_and_restarts import enqueue_all, ids_on_partition

PARTITION = 2


@pytest.fixture(autouse=True)
def marks_move_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(throughput_controller, "MARK_INTERVAL_S", 0.05)
    monkeypatch.setattr(worker, "MARK_COMMIT_INTERVAL_S", 0.05)
    monkeypatch.setattr(task_persistence, "MARK_AGE_MS", 0)


class LoadSpy:
    """Delegates to the store; remembers the partition's loads in call order."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self.loads: list[tuple[str, Any]] = []
        self._lock = threading.Lock()

    def load_tasks(self, partition: int, after: Any, until_ms: int, limit: int) -> Any:
        if partition == PARTITION:
            with self._lock:
                self.loads.append(("range", after))
        return self._store.load_tasks(partition, after, until_ms, limit)

    def load_keys(self, partition: int, keys: Any) -> Any:
        if partition == PARTITION:
            with self._lock:
                self.loads.append(("keys", sorted(keys)))
        return self._store.load_keys(partition, keys)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def committed_mark(engine: Any) -> ReloadMark | None:
    found = engine.log.committed_with_metadata(engine.worker.group_id, [PARTITION])
    return ReloadMark.decode(found[PARTITION][1])


def wait_for(condition: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_the_next_owner_reads_from_the_mark_and_still_runs_every_incomplete_task(data_dir):
    ids = ids_on_partition(PARTITION, 40)
    done = [Task(oid, soon(), f"done-{n}") for oid in ids for n in range(5)]
    stuck = Task(ids[0], soon(), "stuck")  # still running when its worker stops: a straggler

    first = Recorder()
    first.block = lambda task: task.uniqueness_key == "stuck"
    with embedded_engine(first, data_dir=data_dir) as engine:
        enqueue_all(engine, done)
        enqueue_all(engine, [stuck])
        first.started[stuck.key].wait(10)
        wait_for(lambda: {t.key for t in done} <= set(first.keys()))

        def moved_past_the_completed_tasks() -> ReloadMark | None:
            mark = committed_mark(engine)
            latest = max(task.key.cursor for task in done)
            return mark if mark is not None and mark.after > latest else None

        mark = wait_for(moved_past_the_completed_tasks)
        engine.stop(now=True)  # the stuck attempt is cancelled, not waited for
    assert mark.stragglers == (stuck.key,)

    # A second worker: starts at the mark, loads the straggler by key, runs it; then a task is
    # enqueued behind the mark (due just before it, within the grace window) and left running.
    second, spies = Recorder(), []
    behind = Task(ids[1], from_epoch_ms(mark.after[0] - 1), "behind")
    second.block = lambda task: task.uniqueness_key == "behind"

    def spy(store: TaskStore) -> TaskStore:
        spies.append(LoadSpy(store))
        return spies[-1]  # type: ignore[return-value]

    with embedded_engine(second, data_dir=data_dir, wrap_store=spy) as engine:
        wait_for(lambda: stuck.key in second.keys())
        # (The mark committed at the first worker's stop may be later still than `mark`.)
        (keys, stragglers), (_, start) = spies[0].loads[:2]
        assert (keys, stragglers) == ("keys", [stuck.key]) and start >= mark.after
        enqueue_all(engine, [behind])
        second.started[behind.key].wait(10)
        wait_for(lambda: (m := committed_mark(engine)) is not None and behind.key in m.stragglers)
        engine.stop(now=True)
    assert set(second.keys()) == {stuck.key, behind.key}

    # A third: the task written behind the mark is one of its stragglers, and runs.
    third = Recorder()
    with embedded_engine(third, data_dir=data_dir) as engine:
        engine.join()
    assert third.keys() == [behind.key]
