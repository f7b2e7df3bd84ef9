"""What operators' tools share, the CLI's `scheduler tasks` and the REST API alike: finding a task
in the store, showing it, listing tasks a page at a time, and checking that a change to tasks
(retry, drop, rerun, cancel) applies before anything is sent.

Checking first matters because the worker owning a partition can only log a change that does not
apply: the operator would never see why nothing happened. Every key is checked before anything
is sent, so a refusal leaves nothing half done.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from scheduler.errors import TaskNotFoundError, TaskStateError
from scheduler.model import (
    ScheduleCursor,
    StoredTask,
    Task,
    TaskKey,
    TaskState,
    TaskStatus,
    iso_ms,
)
from scheduler.partitioning import partition_for
from scheduler.stores.abc import TaskStore, TaskView
from scheduler.wording import in_state

if TYPE_CHECKING:
    from scheduler.client import SchedulerClient

_SCAN_PAGE = 256
ACK_TIMEOUT_S = 60.0

CHANGES: dict[str, tuple[frozenset[TaskState], str]] = {
    "retry": (frozenset({TaskState.FAILED}), "only failed tasks can be retried"),
    "drop": (frozenset({TaskState.FAILED}), "only failed tasks can be dropped"),
    "rerun": (
        frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED}),
        "only finished (succeeded, failed or cancelled) tasks can be rerun",
    ),
    "cancel": (
        frozenset({TaskState.PENDING, TaskState.RUNNING, TaskState.RETRYING}),
        "only pending, running or retrying tasks can be cancelled",
    ),
}
"""Each change an operator makes to tasks by key: the states it applies to, and the rule said
when a task is in another."""


def partition_of(ordering_id: str, partitions: int) -> int:
    """The partition of an ordering id (Kafka's default partitioner)."""
    return partition_for(ordering_id.encode("utf-8"), partitions)


def find_task(store: TaskStore, partition: int, key: TaskKey) -> TaskView | None:
    """The task with `key` (schedule row and/or status row), or None if the store has neither."""
    status = store.fetch_statuses(partition, [key]).get(key)
    row = _schedule_row(store, partition, key)
    if row is not None:
        return TaskView(partition, row.task, status or row.status)
    if status is not None:
        return TaskView(partition, Task.from_key(key, status.data or {}), status)
    return None


def _schedule_row(store: TaskStore, partition: int, key: TaskKey) -> StoredTask | None:
    """Read forward from just before `key` (no uniqueness key is empty) until past it."""
    cursor = (key.scheduled_ms, key.ordering_id, "")
    while True:
        rows = store.load_tasks(partition, cursor, key.scheduled_ms, _SCAN_PAGE)
        for row in rows:
            if row.task.key == key:
                return row
            if row.task.key > key:
                return None
        if len(rows) < _SCAN_PAGE:
            return None
        cursor = rows[-1].task.key.cursor


def list_page(
    store: TaskStore,
    partitions: Sequence[int],
    *,
    ordering_id: str | None,
    states: Collection[TaskState] | None,
    limit: int,
    after: tuple[int, ScheduleCursor] | None = None,
) -> tuple[list[TaskView], bool]:
    """At most `limit` tasks of `partitions` in (partition, schedule) order, starting after the
    position `after` (a partition and the cursor of the last task shown before); and whether more
    match. The store is read a page at a time, so a listing never holds more than a page."""
    views: list[TaskView] = []
    for partition in partitions:
        cursor = None
        if after is not None:
            if partition < after[0]:
                continue
            cursor = after[1] if partition == after[0] else None
        wanted = limit - len(views) + 1  # one more than shown: whether more match
        views += store.list_tasks(
            partition, ordering_id=ordering_id, states=states, limit=wanted, after=cursor
        )
        if len(views) > limit:
            break
    return views[:limit], len(views) > limit


def check_changes(store: TaskStore, partitions: int, keys: Sequence[TaskKey], verb: str) -> None:
    """Refuse, naming every key that does not apply and why, unless change `verb` (a key of
    `CHANGES`) applies to every task of `keys`: TaskNotFoundError when none of the refused keys
    is in the store, else TaskStateError."""
    allowed, rule = CHANGES[verb]
    refusals = []
    for key in keys:
        partition = partition_of(key.ordering_id, partitions)
        view = find_task(store, partition, key)
        if view is None:
            refusals.append(
                f"no task {describe_key(key)} in the store (partition {partition}); check "
                f"the key with `scheduler tasks list --ordering-id {key.ordering_id}`"
            )
        elif view.state not in allowed:
            refusals.append(f"cannot {verb} {describe_key(key)}: {in_state(view.state)}; {rule}")
    if refusals:
        not_found = all(refusal.startswith("no task") for refusal in refusals)
        error_type = TaskNotFoundError if not_found else TaskStateError
        raise error_type("; ".join(refusals) + "; nothing was changed")


def request_changes(
    client: SchedulerClient,
    keys: Sequence[TaskKey],
    verb: str,
    *,
    data: Mapping[str, Any] | None = None,
    timeout: float = ACK_TIMEOUT_S,
) -> None:
    """Send change `verb` for every key and return once the log has them all (checked first
    with `check_changes`)."""
    operation: Callable[[TaskKey], Future[int]] = getattr(client, f"{verb}_task")
    if data:
        operation = functools.partial(client.rerun_task, data=data)
    futures = [operation(key) for key in keys]
    for future in futures:
        future.result(timeout=timeout)


def describe_key(key: TaskKey) -> str:
    """The key as every command takes it, and as logs print it."""
    return str(key)


def iso(ms: int | None) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds and a Z, or '-'."""
    if ms is None:
        return "-"
    return iso_ms(ms)


def status_dict(view: TaskView) -> dict[str, object]:
    """A task as a JSON object (`--json` output and the API)."""
    status: TaskStatus | None = view.status
    key = view.task.key
    return {
        "key": str(key),
        "partition": view.partition,
        "ordering_id": key.ordering_id,
        "scheduled_time": iso(key.scheduled_ms),
        "scheduled_ms": key.scheduled_ms,
        "uniqueness_key": key.uniqueness_key,
        "state": view.state.value,
        "attempts": status.attempts if status else 0,
        "last_error": status.last_error if status else None,
        "next_attempt_time": iso(status.next_attempt_ms)
        if status and status.next_attempt_ms
        else None,
        "updated_time": iso(status.updated_ms) if status and status.updated_ms else None,
        "data": dict(view.task.data),
    }
