"""A batch the store refused part-way: its rows that did land must not run before those that
did not (issue 45, the `cassandra-quorum-lost` finding of docs/reliability.md)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scheduler import Task
from scheduler.actors.unwritten import UnwrittenRows
from scheduler.codec import Command, Op
from scheduler.errors import BackendUnavailableError
from scheduler.model import TaskKey
from scheduler.stores.abc import TaskStore
from scheduler.testing import TEST_SETTINGS
from tests.engine.flaky import flaky_wrapper
from tests.engine.helpers import STEP_S, Recorder, stepped_engine
from tests.engine.test_failures_and_restarts import ids_on_partition

PARTITION = 1
GATE = 0
LOOKAHEAD_MS = TEST_SETTINGS.lookahead_ms


class HalfWritingStore:
    """Delegates to a real store. While `away`, partition 1's schedule-row writes store only
    the rows due at or after `late_ms` and fail if there were others (a Cassandra batch written
    row by row, some rows reaching a quorum and some not). Writes of partition 0 wait while
    `gate` is clear, and the worker's poll loop with them: records sent meanwhile are read in
    one batch. Loads answer as the real store's; those of partition 1 after a refusal, while
    still away, are counted, and what they returned is kept in `loaded_while_refused`."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self.gate = threading.Event()
        self.gate.set()
        self.at_gate = threading.Event()
        self.away = threading.Event()
        self.late_ms = 0
        self.error: type[Exception] = BackendUnavailableError
        """What a write that stored only part of its rows raises: a refusal, or a bug."""
        self.refused = 0
        self.stored_late = threading.Event()
        self.loaded_while_refused: list[TaskKey] = []
        self.loads_while_refused = 0
        self._loaded = threading.Condition()

    def write_tasks(self, partition: int, tasks: list[Task]) -> Any:
        if partition == GATE:
            self.at_gate.set()
            self.gate.wait(10)
        if partition != PARTITION or not self.away.is_set():
            return self._store.write_tasks(partition, tasks)
        late = [task for task in tasks if task.key.scheduled_ms >= self.late_ms]
        if late:
            self._store.write_tasks(partition, late)
            self.stored_late.set()
        if len(late) < len(tasks):
            self.refused += 1
            raise self.error(f"stored {len(late)} of {len(tasks)} rows, then failed")
        return None

    def load_tasks(self, partition: int, *args: Any, **kwargs: Any) -> Any:
        rows = self._store.load_tasks(partition, *args, **kwargs)
        if partition == PARTITION and self.away.is_set() and self.refused:
            with self._loaded:
                self.loaded_while_refused += [row.task.key for row in rows]
                self.loads_while_refused += 1
                self._loaded.notify_all()
        return rows

    def wait_for_loads(self, count: int, timeout: float) -> bool:
        """Wait until partition 1 has made `count` loads since the first refusal."""
        with self._loaded:
            return self._loaded.wait_for(lambda: self.loads_while_refused >= count, timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.mark.parametrize("error", [BackendUnavailableError, RuntimeError], ids=["refusal", "bug"])
def test_rows_of_a_batch_stored_in_part_do_not_run_before_the_rows_the_store_refused(
    data_dir, error
):
    # The store takes the later half of a batch and refuses the rest: the partition is in
    # OUTAGE, the worker holds the batch and writes it again at each probe, and the tree stays
    # up (a refusal) or is restarted (a bug, at each failed write), loading as the clock moves.
    # No load may hand on the later half before the earlier one is in the store, or the retry
    # pushes the earlier half behind tasks already run: the note of what was refused outlives
    # the tree.
    recorder = Recorder()
    made: list[HalfWritingStore] = []

    def wrap(store: TaskStore) -> Any:
        made.append(HalfWritingStore(store))
        return made[0]

    (oid,) = ids_on_partition(PARTITION, 1)
    (gate_id,) = ids_on_partition(GATE, 1)
    with stepped_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        store = made[0]
        engine.join()  # the partitions' first loads are done: their checkpoints are set
        # Due past the lookahead of the loads so far: rows the tree loads once the clock moves.
        tasks = [Task(oid, engine.at(LOOKAHEAD_MS + 1000 + 100 * i), f"k{i}") for i in range(10)]
        store.late_ms = tasks[5].key.scheduled_ms
        store.error = error
        store.away.set()
        # The poll loop waits in a write of partition 0 while the tasks are sent: it reads
        # them in one batch.
        store.gate.clear()
        store.at_gate.clear()
        engine.client.schedule_task(Task(gate_id, engine.at(), "gate")).result(timeout=10)
        assert store.at_gate.wait(10)
        engine.client.schedule_tasks(tasks).result(timeout=10)
        store.gate.set()
        assert store.stored_late.wait(10)
        # Every task falls due while the earlier half is refused: step the clock a load
        # interval at a time, each step once the tree's last load has answered (the worker's
        # probes fail meanwhile).
        for _ in range(30):
            loads = store.loads_while_refused
            engine.clock.advance(3 * STEP_S)
            if error is BackendUnavailableError:
                assert store.wait_for_loads(loads + 1, 10), "partition 1 stopped loading"
            else:
                # A tree restarted on the bug loads nothing while the note it inherited stands
                # (its first load's stragglers may lie past the refused rows): give it a moment.
                store.wait_for_loads(loads + 1, 0.2)
        assert store.loaded_while_refused == []
        store.away.clear()
        engine.join(raise_failures=error is BackendUnavailableError)  # the bug's are expected
    assert recorder.runs_of(oid) == sorted(task.key for task in tasks)


def test_a_refused_batch_stored_again_with_the_records_read_after_it_ends_its_note(data_dir):
    # The worker holds a refused batch and, paused, the records it reads after it: the retry is
    # a longer batch, reaching further in the log. Once it is stored the partition loads on.
    recorder = Recorder()
    flaky, wrap = flaky_wrapper()
    (oid,) = ids_on_partition(PARTITION, 1)
    with stepped_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        engine.join()
        tree = engine.worker.topic.trees.get()[PARTITION]
        first = Command(Op.SCHEDULE, Task(oid, engine.at(10_000), "first"))
        then = Command(Op.SCHEDULE, Task(oid, engine.at(11_000), "then"))
        flaky[0].unavailable = True  # a refusal: the tree stays up (a bug would restart it)
        flaky[0].fail_next("write_tasks", partition=PARTITION)
        with pytest.raises(BackendUnavailableError):
            tree.persistence.persist([first], 8).get(timeout=10)
        tree.persistence.persist([first, then], 9).get(timeout=10)
        engine.join()
    assert recorder.runs_of(oid) == [first.task.key, then.task.key]


def test_a_partition_whose_refused_rows_the_log_deleted_loads_again_once_a_later_batch_is_stored(
    data_dir,
):
    # A refused batch's records that never come back (the log's retention deleted them): the
    # next batch stored reaches past their offsets, and the partition must load past the
    # refused rows' due time again rather than wait for them for good.
    recorder = Recorder()
    flaky, wrap = flaky_wrapper()
    (oid,) = ids_on_partition(PARTITION, 1)
    with stepped_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        engine.join()
        tree = engine.worker.topic.trees.get()[PARTITION]
        refused = Task(oid, engine.at(10_000), "refused")
        flaky[0].unavailable = True  # a refusal: the tree stays up (a bug would restart it)
        flaky[0].fail_next("write_tasks", partition=PARTITION)
        with pytest.raises(BackendUnavailableError):
            tree.persistence.persist([Command(Op.SCHEDULE, refused)], 8).get(timeout=10)
        later = Task(oid, engine.at(11_000), "later")
        tree.persistence.persist([Command(Op.SCHEDULE, later)], 9).get(timeout=10)
        engine.join()
    assert recorder.runs_of(oid) == [later.key]


LATE = TaskKey("o", "2026-01-01T00:00:02Z", "b")
EARLY = TaskKey("o", "2026-01-01T00:00:01Z", "a")


def test_unwritten_rows_name_the_earliest_refused_row_until_a_batch_reaching_it_is_stored():
    unwritten = UnwrittenRows()
    unwritten.refused([LATE], last_offset=4)
    unwritten.refused([EARLY], last_offset=9)
    assert unwritten.earliest() == EARLY.cursor
    unwritten.stored(4)
    assert unwritten.earliest() == EARLY.cursor
    assert len(unwritten) == 1
    unwritten.stored(9)
    assert unwritten.earliest() is None
    assert not unwritten


def test_a_batch_stored_past_a_refused_batchs_last_offset_ends_its_note():
    unwritten = UnwrittenRows()
    unwritten.refused([EARLY, LATE], last_offset=8)
    unwritten.stored(12)
    assert unwritten.earliest() is None


def test_a_batch_stored_short_of_a_refused_batchs_last_offset_keeps_its_note():
    unwritten = UnwrittenRows()
    unwritten.refused([EARLY, LATE], last_offset=8)
    unwritten.stored(5)
    assert unwritten.earliest() == EARLY.cursor


def test_a_refused_batch_without_schedule_rows_notes_nothing():
    # Only cancels and reruns: no row of it can be overtaken by a load.
    unwritten = UnwrittenRows()
    unwritten.refused([], last_offset=8)
    assert not unwritten
    assert unwritten.earliest() is None
