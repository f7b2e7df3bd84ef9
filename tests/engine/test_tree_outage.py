"""A store that refuses a partition's status writes or loads puts the partition in OUTAGE: its
tree stays up with what it holds, no attempt starts, the store is probed with backoff on the
engine's clock, and the partition resumes where it stood. A SteppedClock and a FlakyStore that
fails as a store that is down does (`BackendUnavailableError`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from scheduler import Task, TaskState
from scheduler.partitioning import partition_for
from scheduler.stores.abc import TaskStore
from tests.engine.flaky import FlakyStore
from tests.engine.helpers import Recorder, SteppedEngine, stepped_engine

PARTITIONS = 4
PARTITION = 1


def ids_on(partition: int, count: int) -> list[str]:
    found, i = [], 0
    while len(found) < count:
        if partition_for(f"id-{i}".encode(), PARTITIONS) == partition:
            found.append(f"id-{i}")
        i += 1
    return found


def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait (real time) for the actors to reach a state; the clock does not move meanwhile."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the engine did not get there in time"
        threading.Event().wait(0.01)


def down_when(away: threading.Event, method: str) -> tuple[list[FlakyStore], Callable]:
    made: list[FlakyStore] = []

    def wrap(store: TaskStore) -> FlakyStore:
        flaky = FlakyStore(store)
        flaky.unavailable = True
        flaky.should_fail = lambda m, p: m == method and p == PARTITION and away.is_set()
        made.append(flaky)
        return flaky

    return made, wrap


def generations(engine: SteppedEngine) -> dict[int, int]:
    return engine.worker.topic.generations.get(timeout=10)


def test_refused_status_writes_hold_starts_keep_the_tree_and_each_task_runs_once() -> None:
    recorder, away = Recorder(), threading.Event()
    flaky, wrap = down_when(away, "record_statuses")
    (oid,) = ids_on(PARTITION, 1)
    with stepped_engine(recorder, partitions=PARTITIONS, wrap_store=wrap) as engine:
        # The first falls due only after the store goes away: one due at once could run, and
        # its statuses go with the persist of the others, before the outage begins.
        tasks = [Task(oid, engine.at(1000 * k + 100), f"k{k}") for k in range(5)]
        for future in [engine.client.schedule_task(task) for task in tasks]:
            future.result(timeout=10)
        engine.wait_persisted(time.monotonic() + 10)
        assert recorder.keys() == []
        away.set()
        engine.clock.advance(0.15)
        until(lambda: recorder.keys() == [tasks[0].key])
        # Its RUNNING and SUCCEEDED cannot be written: the partition enters OUTAGE.
        while flaky[0].injected == 0:
            engine.clock.advance(0.05)
            threading.Event().wait(0.01)
        engine.clock.advance(5.0)  # every other task falls due; none starts
        threading.Event().wait(0.3)
        assert recorder.keys() == [tasks[0].key]
        counts = engine.worker.topic.counts().get(timeout=10)[PARTITION]
        assert counts.executing == 4  # due, queued, held

        away.clear()
        engine.join()
        statuses = engine.store.fetch_statuses(PARTITION, [task.key for task in tasks])
        assert engine.worker.failures() == []
        assert generations(engine)[PARTITION] == 1  # the same tree throughout
    assert recorder.keys() == [task.key for task in tasks]  # each once, in key order
    assert {status.state for status in statuses.values()} == {TaskState.SUCCEEDED}


def test_refused_loads_keep_the_tree_and_it_loads_what_waits_once_the_store_answers() -> None:
    recorder, away = Recorder(), threading.Event()
    away.set()  # from the tree's first load on
    flaky, wrap = down_when(away, "load_tasks")
    with stepped_engine(recorder, partitions=PARTITIONS, wrap_store=wrap) as engine:
        tasks = [Task(oid, engine.at(200), "k") for oid in ids_on(PARTITION, 6)]
        for future in [engine.client.schedule_task(task) for task in tasks]:
            future.result(timeout=10)
        engine.wait_persisted(time.monotonic() + 10)
        for _ in range(40):  # 2 s: probes at 0.05, 0.1, 0.2, 0.4, 0.8 s after the first
            engine.clock.advance(0.05)
            threading.Event().wait(0.005)
        until(lambda: flaky[0].injected >= 3)
        refusals = flaky[0].injected
        assert refusals <= 7  # backed off: not one a load interval (20 in 2 s)
        assert recorder.keys() == []

        away.clear()
        engine.join()
        assert engine.worker.failures() == []
        assert generations(engine)[PARTITION] == 1
    assert sorted(recorder.keys()) == sorted(task.key for task in tasks)
