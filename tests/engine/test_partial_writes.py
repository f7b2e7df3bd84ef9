"""A batch the store refused part-way: its rows that did land must not run before those that
did not (issue 45, the `cassandra-quorum-lost` finding of docs/reliability.md)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from scheduler import Task
from scheduler.actors.unwritten import UnwrittenRows
from scheduler.codec import Command, Op
from scheduler.model import TaskKey
from scheduler.stores.abc import TaskStore
from tests.engine.flaky import InjectedFailure, flaky_wrapper
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


def test_a_partition_whose_refused_rows_the_log_deleted_loads_again_once_a_later_batch_is_stored(
    data_dir,
):
    # The log's retention deleted the refused records before the worker read them again (the
    # case of tests/distributed/test_retention.py): the next batch it stores reaches past their
    # offsets, and the partition must load past the refused rows' due time again.
    recorder = Recorder()
    flaky, wrap = flaky_wrapper()
    (oid,) = ids_on_partition(PARTITION, 1)
    with stepped_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        engine.join()
        tree = engine.worker.topic.trees.get()[PARTITION]
        refused = Task(oid, engine.at(10_000), "refused")
        flaky[0].fail_next("write_tasks", partition=PARTITION)
        with pytest.raises(InjectedFailure):
            tree.persistence.persist([Command(Op.SCHEDULE, refused)], 8).get(timeout=10)
        later = Task(oid, engine.at(11_000), "later")
        tree.persistence.persist([Command(Op.SCHEDULE, later)], 9).get(timeout=10)
        engine.join()
    assert recorder.runs_of(oid) == [later.key]


LATE = TaskKey("o", "2026-01-01T00:00:02Z", "b")
EARLY = TaskKey("o", "2026-01-01T00:00:01Z", "a")


def test_unwritten_rows_name_the_earliest_row_until_its_batch_is_written():
    unwritten = UnwrittenRows()
    late = unwritten.writing([LATE], last_offset=4)
    early = unwritten.writing([EARLY], last_offset=9)
    assert unwritten.earliest() == EARLY.cursor
    unwritten.written(late)
    assert unwritten.earliest() == EARLY.cursor
    unwritten.written(early)
    assert unwritten.earliest() is None
    assert len(unwritten) == 0


def test_a_batch_stored_up_to_a_failed_batchs_last_offset_drops_its_note():
    # The failed batch's records were deleted by retention before the retry: the batch after
    # them, stored, reaches past their offsets, and no retry of theirs is coming.
    unwritten = UnwrittenRows()
    unwritten.writing([EARLY, LATE], last_offset=8)  # refused, never written
    unwritten.written(unwritten.writing([], last_offset=8))
    assert unwritten.earliest() is None


def test_a_batch_stored_short_of_a_failed_batchs_last_offset_keeps_its_note():
    # A retry that read only part of the failed batch again: its rest is still to come.
    unwritten = UnwrittenRows()
    unwritten.writing([EARLY, LATE], last_offset=8)
    unwritten.written(unwritten.writing([LATE], last_offset=5))
    assert unwritten.earliest() == EARLY.cursor


def test_a_batch_not_read_from_the_log_drops_only_its_own_note():
    unwritten = UnwrittenRows()
    unwritten.writing([EARLY], last_offset=3)
    unwritten.written(unwritten.writing([LATE], last_offset=None))
    assert unwritten.earliest() == EARLY.cursor
    assert len(unwritten) == 1
