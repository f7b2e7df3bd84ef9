"""Operators' bulk changes: retry, drop or rerun every task a filter selects.

The tasks are found in the store, a page at a time (`TaskStore.list_tasks` after a cursor), so
a filter that matches a million tasks never holds more than a page of them; each one found is
changed by the same record on the log as a single-key change (`SchedulerClient.retry_task`,
`drop_task`, `rerun_task`), applied by the partition's owner in order with its tasks. A dry run
reads the same pages and sends nothing.

What is found is what the store held when its page was read: a task that finishes while the
pages are read is found in the state it had then, and a change that no longer applies when its
record arrives is logged and ignored by the worker (see docs/architecture.md, "Operators' bulk
changes").
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime

from scheduler.errors import TaskStateError
from scheduler.model import ScheduleCursor, TaskKey, TaskState, to_epoch_ms
from scheduler.partitioning import partition_for
from scheduler.stores.abc import TaskStore, TaskView

PAGE_SIZE = 500
"""Tasks read from the store per page."""
IN_FLIGHT = 2_000
"""Records sent and not yet acknowledged, at most: memory stays flat however many match."""
SAMPLE_SIZE = 10
"""How many of the keys touched a result keeps, to show an operator what was (or would be)."""
ACK_TIMEOUT_S = 60.0


class BulkOperation(enum.StrEnum):
    """A change an operator makes to many finished tasks at once."""

    RETRY = "retry"
    """FAILED tasks run again from their first attempt, with the data they failed with."""
    DROP = "drop"
    """FAILED tasks are forgotten: their status rows are deleted."""
    RERUN = "rerun"
    """Finished tasks (succeeded, failed or cancelled) run once more from their first attempt."""

    @property
    def states(self) -> frozenset[TaskState]:
        """The states of the tasks the operation applies to."""
        if self is BulkOperation.RERUN:
            return frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})
        return frozenset({TaskState.FAILED})


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which tasks a bulk operation touches: those that match every field given."""

    ordering_id: str | None = None
    """Only the tasks of this ordering id (one partition is read)."""
    states: Collection[TaskState] | None = None
    """Only tasks in these states (each one the operation applies to); None: all it applies to."""
    scheduled_from: datetime | None = None
    """Only tasks scheduled at or after this time (an aware datetime)."""
    scheduled_before: datetime | None = None
    """Only tasks scheduled before this time (an aware datetime)."""
    partition: int | None = None
    """Only the tasks of this partition."""


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk operation touched, or would touch in a dry run."""

    operation: BulkOperation
    """The change made."""
    count: int
    """How many tasks were changed (requested on the log), or would be in a dry run."""
    sample: tuple[tuple[int, TaskKey], ...] = field(default=())
    """The first (partition, key) pairs touched, at most `SAMPLE_SIZE`: partitions in order,
    keys in schedule order within each."""
    dry_run: bool = False
    """Whether nothing was sent (the count says what a real run would touch now)."""


def matching(
    store: TaskStore,
    partitions: int,
    operation: BulkOperation,
    where: TaskFilter,
    *,
    page_size: int = PAGE_SIZE,
) -> Iterator[TaskView]:
    """The tasks `where` selects that `operation` applies to, a page of the store at a time:
    partitions in order, each in schedule order."""
    states = _states(operation, where)
    from_ms = None if where.scheduled_from is None else to_epoch_ms(where.scheduled_from)
    until_ms = None if where.scheduled_before is None else to_epoch_ms(where.scheduled_before)
    for partition in _partitions(partitions, where):
        after: ScheduleCursor | None = None
        while True:
            page = store.list_tasks(
                partition,
                ordering_id=where.ordering_id,
                states=states,
                limit=page_size,
                after=after,
                from_ms=from_ms,
                until_ms=until_ms,
            )
            yield from page
            if len(page) < page_size:
                break
            after = page[-1].task.key.cursor


def apply(
    store: TaskStore,
    partitions: int,
    operation: BulkOperation,
    where: TaskFilter,
    send: Callable[[TaskKey], Future[int]],
    *,
    dry_run: bool = False,
    page_size: int = PAGE_SIZE,
) -> BulkResult:
    """Send `operation`'s record for every task `where` selects (nothing if `dry_run`) and
    return once the log has them all; what was touched.

    A failed send raises its error; the tasks before it were requested already (sending the
    same operation again is harmless: a task changed already no longer matches)."""
    count, sample = 0, list[tuple[int, TaskKey]]()
    waiting: deque[Future[int]] = deque()
    for view in matching(store, partitions, operation, where, page_size=page_size):
        key = view.task.key
        if len(sample) < SAMPLE_SIZE:
            sample.append((view.partition, key))
        count += 1
        if dry_run:
            continue
        waiting.append(send(key))
        while len(waiting) >= IN_FLIGHT or (waiting and waiting[0].done()):
            waiting.popleft().result(timeout=ACK_TIMEOUT_S)
    for future in waiting:
        future.result(timeout=ACK_TIMEOUT_S)
    return BulkResult(operation, count, tuple(sample), dry_run)


def _states(operation: BulkOperation, where: TaskFilter) -> frozenset[TaskState]:
    if where.states is None:
        return operation.states
    wanted = frozenset(TaskState(state) for state in where.states)
    wrong = sorted(state.value for state in wanted - operation.states)
    if wrong:
        allowed = " or ".join(sorted(state.value for state in operation.states))
        raise TaskStateError(
            f"cannot {operation.value} tasks that are {', '.join(wrong)}: {operation.value} "
            f"applies to {allowed} tasks only; filter on those states, or leave the state out"
        )
    return wanted


def _partitions(partitions: int, where: TaskFilter) -> list[int]:
    if where.partition is not None and not 0 <= where.partition < partitions:
        raise ValueError(
            f"partition {where.partition} does not exist; there are {partitions} "
            f"(0 to {partitions - 1})"
        )
    if where.ordering_id is not None:
        home = partition_for(where.ordering_id.encode("utf-8"), partitions)
        return [home] if where.partition in (None, home) else []
    return [where.partition] if where.partition is not None else list(range(partitions))
