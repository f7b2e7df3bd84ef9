"""The admin view's reads of the Cassandra task store.

Unlike the engine's loads, these scan whole buckets, tombstones included: they are rare, run by
an operator, and stop as soon as the caller has seen enough (`views` is lazy). Both bucket
indexes are walked, because a failed task's status outlives its schedule bucket's index row.
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


def views(run: Runner, q: Mapping[str, Any], partition: int) -> Iterator[TaskView]:
    """Every schedule row of the partition, and every retained final status without one, in
    schedule order, joined."""
    buckets = {b for (b,) in run.one(q["buckets"], (partition, *_ALL), "list buckets")}
    buckets |= {b for (b,) in run.one(q["status_buckets"], (partition,), "list buckets")}
    for bucket in sorted(buckets):
        rows = run.one(q["scan"], (partition, bucket), "list tasks")
        tasks = {TaskKey.from_ms(oid, ms, uk): data for ms, oid, uk, data in rows}
        rows = run.one(q["status_scan"], (partition, bucket), "list statuses")
        statuses = {status.key: status for status in map(schema.decode_status, rows)}
        for key in sorted(tasks.keys() | statuses.keys()):
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
    after: ScheduleCursor | None = None,
) -> int:
    """Schedule rows due at or before `now_ms`, after `after` if given: one COUNT per indexed
    bucket, concurrently; the first bucket's from the cursor with a clustering bound, so that
    the tombstones behind a reload mark are not read."""
    first = _ALL[0] if after is None else after[0] // bucket_ms
    indexed = run.one(q["buckets"], (partition, first, now_ms // bucket_ms), "count due tasks")
    items: list[Item] = []
    for (b,) in indexed:
        below = min(now_ms + 1, (b + 1) * bucket_ms)
        if after is not None and b == first:
            items.append((q["count_after"], (partition, b, *after, below)))
        else:
            items.append((q["count"], (partition, b, below)))
    return sum(int(rows[0][0]) for rows in run.many(items, "count due tasks") if rows)
