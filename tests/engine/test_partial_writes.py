"""A batch the store refused part-way: its rows that did land must not run before those that
did not (issue 45, the `cassandra-quorum-lost` finding of docs/reliability.md)."""

from __future__ import annotations

import threading
import time
from typing import Any

from scheduler import Task
from scheduler.actors.unwritten import UnwrittenRows
from scheduler.model import TaskKey
from scheduler.stores.abc import TaskStore
from tests.engine.flaky import InjectedFailure
from tests.engine.helpers import Recorder, stepped_engine
from tests.engine.test_failures_and_restarts import enqueue_all, ids_on_partition

PARTITION = 1


class HalfWritingStore:
    """Delegates to a real store. While `away`, partition 1's schedule-row writes store only
    the rows due at or after `late_ms` and fail if there were others (a Cassandra batch written
    row by row, some rows reaching a quorum and some not), and its first load once the late
    rows are stored fails too (the tree dies and is restarted, as when a node is down)."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self.away = threading.Event()
        self.late_ms = 0
        self.refused = 0
        self.stored_late = threading.Event()
        self.load_failures = 0

    def write_tasks(self, partition: int, tasks: list[Task]) -> Any:
        if partition != PARTITION or not self.away.is_set():
            return self._store.write_tasks(partition, tasks)
        late = [task for task in tasks if task.key.scheduled_ms >= self.late_ms]
        if late:
            self._store.write_tasks(partition, late)
            self.stored_late.set()
        if len(late) < len(tasks):
            self.refused += 1
            raise InjectedFailure(f"stored {len(late)} of {len(tasks)} rows, then failed")
        return None

    def load_tasks(self, partition: int, *args: Any, **kwargs: Any) -> Any:
        if partition == PARTITION and self.stored_late.is_set() and self.load_failures == 0:
            self.load_failures += 1
            raise InjectedFailure("the load of partition 1 fails once")
        return self._store.load_tasks(partition, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def wait_for(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_rows_of_a_batch_stored_in_part_do_not_run_before_the_rows_the_store_refused(data_dir):
    recorder = Recorder()
    made: list[HalfWritingStore] = []

    def wrap(store: TaskStore) -> Any:
        made.append(HalfWritingStore(store))
        return made[0]

    (oid,) = ids_on_partition(PARTITION, 1)
    with stepped_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        store = made[0]
        engine.join()  # the partitions' first loads are done: their checkpoints are set
        tasks = [Task(oid, engine.at(1000 + 100 * i), f"k{i}") for i in range(10)]
        store.late_ms = tasks[5].key.scheduled_ms
        store.away.set()
        enqueue_all(engine, tasks)
        assert wait_for(lambda: store.refused > 0 and store.stored_late.is_set(), 10)
        # Step the clock (under the tasks' due times): the tree's next load fails, the tree
        # dies and a new one starts, whose first load finds the later rows in the store.
        deadline = time.monotonic() + 10
        while engine.worker.topic.generations.get()[PARTITION] < 2:
            assert time.monotonic() < deadline, "partition 1 was not restarted"
            engine.clock.advance(0.05)
            time.sleep(0.05)
        for _ in range(4):
            engine.clock.advance(0.05)
            time.sleep(0.05)
        # Every task falls due while the earlier half is still refused.
        engine.clock.advance(2.0)
        wait_for(lambda: len(recorder.runs_of(oid)) >= 5, 1.5)
        store.away.clear()
        engine.join(raise_failures=False)
    assert recorder.runs_of(oid) == sorted(task.key for task in tasks)


def test_unwritten_rows_name_the_earliest_key_until_all_are_written():
    unwritten = UnwrittenRows()
    late = TaskKey("o", "2026-01-01T00:00:02Z", "b")
    early = TaskKey("o", "2026-01-01T00:00:01Z", "a")
    unwritten.writing([late, early])
    assert unwritten.earliest() == early.cursor
    unwritten.written([early])
    assert unwritten.earliest() == late.cursor
    unwritten.written([late])
    assert unwritten.earliest() is None
    assert len(unwritten) == 0
