"""A batch write that fails is a refusal (OUTAGE: pause, hold, probe) or a bug (the partition's
tree is restarted, the batch held for the new tree); a write that hangs holds up only its own
partition, never the poll loop. Embedded log and SQLite store."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from scheduler import Task, TaskState
from scheduler.stores.abc import TaskStore
from scheduler.testing import embedded_engine
from tests.engine.flaky import FlakyStore
from tests.engine.helpers import Recorder, soon
from tests.engine.test_failures_and_restarts import ids_on_partition

P, Q = 1, 2


def committed(engine: Any, partition: int) -> int | None:
    """The group's committed offset of `partition` (None before the first commit)."""
    consumer = engine.worker._consumer
    return consumer.committed_with_metadata([partition])[partition][0]


@pytest.mark.parametrize("failure", ["bug", "unavailable", "forbidden"])
def test_a_failed_batch_write_is_held_and_committed_only_once_stored_and_only_a_bug_restarts(
    data_dir, caplog, failure
):
    # "forbidden": the store refuses by its configuration (a permission revoked, as Cassandra
    # says it: a ConfigurationError), which an operator fixes: a refusal, not a bug.
    from scheduler.errors import ConfigurationError

    recorder = Recorder()
    engines: list[Any] = []
    committed_at_writes: list[int | None] = []

    def fail_first_write(method: str, partition: int) -> bool:
        if method != "write_tasks" or partition != P:
            return False
        committed_at_writes.append(committed(engines[0], P))
        return len(committed_at_writes) == 1

    def wrap(store: TaskStore) -> Any:
        flaky = FlakyStore(store)
        flaky.unavailable = failure == "unavailable"
        if failure == "forbidden":
            flaky._failure = lambda method, partition: ConfigurationError(  # type: ignore[method-assign]
                "User scheduler has no MODIFY permission on <table ks.tasks>"
            )
        flaky.should_fail = fail_first_write
        return flaky

    (oid,) = ids_on_partition(P, 1)
    tasks = [Task(oid, soon(i), f"k{i}") for i in range(10)]
    caplog.set_level("INFO", logger="scheduler.worker")
    with embedded_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        engines.append(engine)
        engine.client.schedule_tasks(tasks).result(timeout=10)
        engine.join(raise_failures=False)
        generations = engine.worker.topic.generations.get()
        failures = engine.worker.failures()
        assert committed(engine, P) == len(tasks)
    # The write that failed and the one that stored the batch both came before any commit.
    assert committed_at_writes[:2] == [None, None]
    assert recorder.runs_of(oid) == [task.key for task in tasks]  # each once, in order
    errors = [r for r in caplog.records if r.name == "scheduler.worker" and r.levelname == "ERROR"]
    assert len(errors) == 1
    assert f"partition {P}" in errors[0].getMessage()
    if failure != "bug":
        assert generations[P] == 1 and failures == []
        assert errors[0].exc_info is None
        assert "could not persist a batch" in errors[0].getMessage()
    else:
        assert generations[P] == 2
        assert [(f.partition, type(f.error).__name__) for f in failures] == [(P, "InjectedFailure")]
        assert errors[0].exc_info is not None  # a bug is logged with its traceback
        assert "a bug failed the write" in errors[0].getMessage()


class HangingStore:
    """Delegates to a real store; partition P's schedule-row writes wait while `gate` is clear
    (a Cassandra node that takes the request and does not answer). Each write of P is noted in
    `writes` as it is made: its keys and their data's `v`."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self.gate = threading.Event()
        self.at_gate = threading.Event()
        self.writes: list[list[tuple[str, int]]] = []

    def write_tasks(self, partition: int, tasks: list[Task]) -> Any:
        if partition == P:
            self.writes.append([(t.uniqueness_key, t.data.get("v", 0)) for t in tasks])
            self.at_gate.set()
            self.gate.wait(30)
        return self._store.write_tasks(partition, tasks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_write_that_hangs_pauses_its_partition_while_the_poll_loop_goes_on(data_dir, monkeypatch):
    """The loop waits for a batch's write a bounded time, then goes on with the partition
    paused: other partitions are stored and committed, /healthz stays fresh. Once the write
    answers, the partition's later records are stored after it, and everything runs once."""
    from scheduler import worker as worker_module

    monkeypatch.setattr(worker_module, "PERSIST_WAIT_S", 0.2)
    recorder = Recorder()
    made: list[HangingStore] = []

    def wrap(store: TaskStore) -> Any:
        made.append(HangingStore(store))
        return made[0]

    (oid,) = ids_on_partition(P, 1)
    others = [Task(other, soon(), "q") for other in ids_on_partition(Q, 5)]
    first = Task(oid, soon(), "a", {"v": 1})
    again = Task(oid, soon(), "a", {"v": 2})  # the same key: a later write of it wins
    then = Task(oid, soon(), "b")
    with embedded_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        store = made[0]
        engine.client.schedule_task(first).result(timeout=10)
        assert store.at_gate.wait(10)
        engine.client.schedule_tasks([again, then, *others]).result(timeout=10)
        deadline = time.monotonic() + 20
        while committed(engine, Q) != len(others) or len(recorder.keys()) < len(others):
            assert time.monotonic() < deadline, "the other partition was not stored and run"
            time.sleep(0.02)
        assert committed(engine, P) is None  # nothing of P is committed while its write hangs
        health = engine.worker.health()
        assert health.state == "running" and health.last_poll_s < 1.0, health
        assert store.writes == [[("a", 1)]]  # nothing of P written past the hanging write
        store.gate.set()
        engine.join()
        assert committed(engine, P) == 3
        status = engine.store.fetch_statuses(P, [then.key])[then.key]
    assert [write for batch in store.writes for write in batch] == [("a", 1), ("a", 2), ("b", 0)]
    assert recorder.runs_of(oid) == [first.key, then.key]
    assert sorted(recorder.keys()) == sorted([first.key, then.key, *(t.key for t in others)])
    assert status.state is TaskState.SUCCEEDED


def test_a_failing_write_under_way_counts_as_a_refusal_and_a_probe_stores_the_batch(
    data_dir, monkeypatch, caplog
):
    """A write past the loop's wait that then fails puts the partition in OUTAGE like a
    refusal on the spot; the probe that follows stores the batch and commits it."""
    from scheduler import worker as worker_module
    from scheduler.errors import BackendUnavailableError

    monkeypatch.setattr(worker_module, "PERSIST_WAIT_S", 0.1)
    recorder = Recorder()
    gate, at_gate = threading.Event(), threading.Event()
    calls: list[int] = []

    class SlowThenRefusing(FlakyStore):
        def write_tasks(self, partition: int, tasks: list[Task]) -> Any:
            if partition == P:
                calls.append(len(tasks))
                if len(calls) == 1:
                    at_gate.set()
                    gate.wait(30)
                    raise BackendUnavailableError("the node went away while it held the write")
            return self._store.write_tasks(partition, tasks)

    (oid,) = ids_on_partition(P, 1)
    tasks = [Task(oid, soon(i), f"k{i}") for i in range(3)]
    caplog.set_level(logging.INFO, logger="scheduler.worker")
    with embedded_engine(recorder, data_dir=data_dir, wrap_store=SlowThenRefusing) as engine:
        engine.client.schedule_tasks(tasks).result(timeout=10)
        assert at_gate.wait(10)
        deadline = time.monotonic() + 10
        while P not in engine.worker._outages:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert engine.worker.health().persist_failing == {}  # under way, not failing yet
        gate.set()
        engine.join(raise_failures=False)
        assert engine.worker.failures() == []
        assert committed(engine, P) == len(tasks)
    assert len(calls) >= 2
    assert recorder.runs_of(oid) == [task.key for task in tasks]
    messages = [r.getMessage() for r in caplog.records]
    assert any("could not persist a batch of partition 1" in m for m in messages)
    assert any("partition 1 is persisting again after 1 failed attempt" in m for m in messages)
