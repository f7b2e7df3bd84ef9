"""Property: enqueues, duplicate keys, executor failures and partition restarts in any mix never
lose a task and never break per-ordering-id order.

The engine runs on a stepped clock: every task is enqueued before the first falls due, however
slow the machine, and waiting for due times and retry backoffs costs no real time."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from scheduler import Task, TaskState
from scheduler.partitioning import partition_for
from tests.engine.flaky import flaky_wrapper
from tests.engine.helpers import stepped_engine

ORDERING_IDS = ["a", "b", "c", "d", "e", "f"]


@dataclass(frozen=True)
class Enqueue:
    ordering_id: str
    slot: int
    uniqueness_key: str
    failures: int


@dataclass(frozen=True)
class KillPartition:
    partition: int
    method: str


operations = st.lists(
    st.one_of(
        st.builds(
            Enqueue,
            st.sampled_from(ORDERING_IDS),
            st.integers(0, 30),
            st.sampled_from(["u0", "u1", "u2"]),
            st.integers(0, 3),
        ),
        st.builds(
            KillPartition,
            st.integers(0, 3),
            st.sampled_from(["record_statuses", "fetch_statuses", "load_tasks", "write_tasks"]),
        ),
    ),
    min_size=1,
    max_size=40,
)


class Observer:
    """Executor that fails as told by task data and checks one-at-a-time per ordering id."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[str, int] = defaultdict(int)
        self.overlaps = 0
        self.runs: list[tuple[int, str, str]] = []

    def __call__(self, task, context):
        with self.lock:
            self.running[task.ordering_id] += 1
            if self.running[task.ordering_id] > 1:
                self.overlaps += 1
            self.runs.append(task.key.cursor)
        try:
            if context.attempt <= task.data["failures"]:
                raise RuntimeError("planned failure")
        finally:
            with self.lock:
                self.running[task.ordering_id] -= 1


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(operations)
def test_no_task_is_lost_and_each_ordering_id_runs_in_key_order(ops):
    observer = Observer()
    flaky, wrap = flaky_wrapper()
    with stepped_engine(observer, wrap_store=wrap) as engine:
        base = engine.at(1500)
        accepted: dict[tuple[str, int, str], Task] = {}
        for op in ops:
            if isinstance(op, KillPartition):
                flaky[0].fail_next(op.method, partition=op.partition)
                continue
            task = Task(
                op.ordering_id,
                base + timedelta(milliseconds=10 * op.slot),
                op.uniqueness_key,
                {"failures": op.failures},
            )
            engine.client.schedule_task(task).result(timeout=10)
            accepted[task.key.cursor] = task
        engine.join(timeout=60, raise_failures=False)
        statuses = {}
        for task in accepted.values():
            partition = partition_for(task.ordering_id.encode(), 4)
            statuses[task.key] = engine.store.fetch_statuses(partition, [task.key]).get(task.key)
    note(f"injected failures: {flaky[0].injected}")

    # Nothing lost: every accepted key ran and reached a final state.
    assert set(observer.runs) == set(accepted)
    assert all(
        s is not None and s.state in {TaskState.SUCCEEDED, TaskState.FAILED}
        for s in statuses.values()
    ), statuses
    # One at a time per ordering id, always.
    assert observer.overlaps == 0
    # Key order (every task was persisted before the first fell due).
    first_runs: dict[str, list[tuple[int, str]]] = defaultdict(list)
    seen = set()
    for ms, ordering_id, key in observer.runs:
        if (ms, ordering_id, key) not in seen:
            seen.add((ms, ordering_id, key))
            first_runs[ordering_id].append((ms, key))
    for ordering_id, runs in first_runs.items():
        assert runs == sorted(runs), ordering_id
