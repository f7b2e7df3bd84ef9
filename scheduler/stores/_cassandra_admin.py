"""The admin view's reads of the Cassandra task store.

Unlike the engine's loads, these scan whole buckets, tombstones included: they are rare, run by
an operator, and stop as soon as the caller has seen enough (`views` is lazy). Like the loads,
they read a bucket in spans of the store's `read_slice_ms` (`schema.slices`), so no one query
scans more tombstones than the tasks completed in one span. Both bucket indexes are walked,
because a failed task's status outlives its schedule bucket's index row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from scheduler.model import ScheduleCursor, Task, TaskKey
from scheduler.stores import cassandra_schema as schema
from scheduler.stores._cassandra_session import Item, Runner
from scheduler.stores.abc import TaskView

_ALL = (-(2**63), 2**63 - 1)
_SCANS = ("scan", "status_scan")


BEFORE_ALL: ScheduleCursor = (_ALL[0], "", "")
"""A cursor before every key."""


def views(
    run: Runner,
    q: Mapping[str, Any],
    partition: int,
    bucket_ms: int,
    slice_ms: int,
    *,
    after: ScheduleCursor | None = None,
    until_ms: int | None = None,
) -> Iterator[TaskView]:
    """Every schedule row of the partition, and every retained final status without one, in
    schedule order, joined; only those after the cursor `after` and scheduled before
    `until_ms`, if given (the buckets and spans outside are not read)."""
    lower = after or BEFORE_ALL
    first = lower[0] // bucket_ms
    last = _ALL[1] if until_ms is None else (until_ms - 1) // bucket_ms
    buckets = {b for (b,) in run.one(q["buckets"], (partition, first, last), "list buckets")}
    buckets |= {
        b
        for (b,) in run.one(q["status_buckets"], (partition,), "list buckets")
        if first <= b <= last
    }
    for bucket in sorted(buckets):
        start = bucket * bucket_ms
        below = start + bucket_ms if until_ms is None else min(start + bucket_ms, until_ms)
        spans = list(schema.slices(max((start, "", ""), lower), below, slice_ms))
        for first_span in range(0, len(spans), SPANS_AT_ONCE):
            chunk = spans[first_span : first_span + SPANS_AT_ONCE]
            # Each span from its lower cursor: the first one of the cursor's bucket starts right
            # after the cursor's row (a clustering-key restriction), the others at their start.
            bounds = [(partition, bucket, *after_row, upper) for after_row, upper in chunk]
            yield from _joined(run, q, partition, bounds, lower)


SPANS_AT_ONCE = 16
"""Spans of a bucket read in one concurrent round: most spans of a sparse bucket are empty, so
a round costs about one query's wait, while a caller that stops early (a page of a bulk change)
holds at most this many spans' rows, not a whole bucket's."""


def _joined(
    run: Runner,
    q: Mapping[str, Any],
    partition: int,
    bounds: list[tuple[int, int, int, str, str, int]],
    lower: ScheduleCursor,
) -> Iterator[TaskView]:
    """The views of the rows and statuses within `bounds`, after `lower`, in schedule order."""
    results = run.many([(q[name], b) for b in bounds for name in _SCANS], "list tasks")
    tasks = {
        TaskKey.from_ms(oid, ms, uk): data for rows in results[0::2] for ms, oid, uk, data in rows
    }
    statuses = {
        status.key: status for rows in results[1::2] for status in map(schema.decode_status, rows)
    }
    for key in sorted(tasks.keys() | statuses.keys()):
        if key.cursor <= lower:
            continue  # in the span of the cursor, not after it
        status = statuses.get(key)
        if key in tasks:
            yield TaskView(partition, Task.from_key(key, json.loads(tasks[key])), status)
        elif status is not None and status.state.is_final:
            yield TaskView(partition, Task.from_key(key, status.data or {}), status)


def count_due(
    run: Runner,
    q: Mapping[str, Any],
    partition: int,
    now_ms: int,
    bucket_ms: int,
    slice_ms: int,
    after: ScheduleCursor | None = None,
) -> int:
    """Schedule rows due at or before `now_ms`, after `after` if given: one COUNT per span of
    `slice_ms` in each indexed bucket, concurrently; the first bucket's from the cursor, so that
    the tombstones behind a reload mark are not read."""
    first = _ALL[0] if after is None else after[0] // bucket_ms
    indexed = run.one(q["buckets"], (partition, first, now_ms // bucket_ms), "count due tasks")
    items: list[Item] = []
    for (b,) in indexed:
        lower: ScheduleCursor = (b * bucket_ms, "", "")
        if after is not None and b == first:
            lower = max(lower, after)
        below = min(now_ms + 1, (b + 1) * bucket_ms)
        items += [
            (q["count_after"], (partition, b, *cursor, upper))
            for cursor, upper in schema.slices(lower, below, slice_ms)
        ]
    return sum(int(rows[0][0]) for rows in run.many(items, "count due tasks") if rows)
