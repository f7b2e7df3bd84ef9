"""The admin view's reads of the Cassandra task store: from any cursor, tombstones included, a
page reading about the rows it shows (each query has a LIMIT), a bucket in spans of
`read_slice_ms` (`schema.slices`) like the loads. Both bucket indexes are walked: a failed
task's status outlives its schedule bucket's index row."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from scheduler.model import ScheduleCursor, Task
from scheduler.stores import cassandra_schema as schema
from scheduler.stores._cassandra_session import Item, Runner
from scheduler.stores.abc import TaskView

_ALL = (-(2**63), 2**63 - 1)


BEFORE_ALL: ScheduleCursor = (_ALL[0], "", "")
"""A cursor before every key."""


def page(
    run: Runner,
    q: Mapping[str, Any],
    partition: int,
    bucket_ms: int,
    slice_ms: int,
    *,
    limit: int,
    after: ScheduleCursor | None = None,
    until_ms: int | None = None,
    ordering_id: str | None = None,
    keep: Callable[[TaskView], bool] | None = None,
    at_once: int = 1,
) -> list[TaskView]:
    """At most `limit` views of the partition's schedule rows, and of its retained final
    statuses without one, in schedule order, joined: only those after the cursor `after`,
    scheduled before `until_ms` if given, of `ordering_id` if given, and that `keep` keeps.

    Each query reads one span from its cursor with a LIMIT of the rows still wanted. A table
    whose read filled its LIMIT is known only up to its last row, so the join shows the rows up
    to the smaller of the two tables' last rows and reads on from there. Empty spans widen the
    next round (1, 2, 4, ... `SPANS_AT_ONCE`, starting from `at_once`); rows `keep` refuses grow
    the LIMIT (up to `MAX_ROWS`)."""
    if limit <= 0:
        return []
    found: list[TaskView] = []
    spans = _spans(run, q, partition, bucket_ms, slice_ms, after or BEFORE_ALL, until_ms)
    queue: deque[_Span] = deque()
    width, size = at_once, limit
    widest = max(SPANS_AT_ONCE, at_once)
    while len(found) < limit:
        while len(queue) < width and (span := next(spans, None)) is not None:
            queue.append(span)
        if not queue:
            break
        round_ = list(islice(queue, width))
        reads = [_reads(q, partition, span, size, ordering_id) for span in round_]
        results = iter(run.many([item for read in reads for item in read.items], "list tasks"))
        outcomes = [read.outcome(results) for read in reads]
        refused = False
        for span, (views, boundary) in zip(round_, outcomes, strict=True):
            for view in views:
                if keep is None or keep(view):
                    found.append(view)
                else:
                    refused = True
            if len(found) >= limit:
                break
            queue.popleft()
            if boundary is not None:  # a LIMIT was reached: read on from the last row known
                queue.appendleft(_Span(span.bucket, boundary, span.upper))
                break
        width = 1 if boundary is not None else min(2 * width, widest)
        size = min(max(size * 4, limit - len(found)), MAX_ROWS) if refused else limit - len(found)
    return found[:limit]


SPANS_AT_ONCE = 16
"""Most spans of a bucket read in one concurrent round: most spans of a sparse bucket are
empty, so a round costs about one query's wait."""

FILTERED_AT_ONCE = 64
"""Spans read in one concurrent round when the node filters them by ordering id (no index):
each returns only that id's rows, so an hour's bucket is one round, not seven widening ones."""

MAX_ROWS = 5_000
"""The largest LIMIT of one query, reached when a filter (the states) refuses the rows read."""


@dataclass(frozen=True, slots=True)
class _Span:
    """A range of one bucket still to read: rows after `lower`, scheduled before `upper`."""

    bucket: int
    lower: ScheduleCursor
    upper: int


def _spans(
    run: Runner,
    q: Mapping[str, Any],
    partition: int,
    bucket_ms: int,
    slice_ms: int,
    lower: ScheduleCursor,
    until_ms: int | None,
) -> Iterator[_Span]:
    """The spans after `lower` (and before `until_ms`) of the buckets that may hold rows, in
    order. Both bucket indexes count: a failed task's status outlives its bucket's index row."""
    first = lower[0] // bucket_ms
    last = _ALL[1] if until_ms is None else (until_ms - 1) // bucket_ms
    indexed, with_statuses = run.many(
        [(q["buckets"], (partition, first, last)), (q["status_buckets"], (partition,))],
        "list buckets",
    )
    buckets = {b for (b,) in indexed} | {b for (b,) in with_statuses if first <= b <= last}
    for bucket in sorted(buckets):
        start = bucket * bucket_ms
        below = start + bucket_ms if until_ms is None else min(start + bucket_ms, until_ms)
        for after_row, upper in schema.slices(max((start, "", ""), lower), below, slice_ms):
            yield _Span(bucket, after_row, upper)


_Rows = list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class _Read:
    """The queries of one span and how to join their rows."""

    partition: int
    lower: ScheduleCursor
    size: int
    items: list[Item]
    parts: int
    """Queries per table: 1, or 2 for an ordering id read from inside a millisecond."""

    def outcome(self, results: Iterator[_Rows]) -> tuple[list[TaskView], ScheduleCursor | None]:
        """The span's views known complete, and the last key known (None: the span is done)."""
        schedule, task_end = self._table(results)
        status, status_end = self._table(results)
        ends = [end for end in (task_end, status_end) if end is not None]
        boundary = min(ends) if ends else None
        tasks = {task.key: task for task in map(schema.decode_task, schedule)}
        statuses = {s.key: s for s in map(schema.decode_status, status)}
        views = []
        for key in sorted(tasks.keys() | statuses.keys()):
            cursor = key.cursor
            if cursor <= self.lower:
                continue
            if boundary is not None and cursor > boundary:
                break
            found = statuses.get(key)
            if key in tasks:
                views.append(TaskView(self.partition, tasks[key], found))
            elif found is not None and found.state.is_final:
                views.append(TaskView(self.partition, Task.from_key(key, found.data or {}), found))
        return views, boundary

    def _table(self, results: Iterator[_Rows]) -> tuple[_Rows, ScheduleCursor | None]:
        """One table's rows, and the key of the last if a query filled its LIMIT."""
        rows: _Rows = []
        end = None
        for _ in range(self.parts):
            part = next(results)
            if end is None:
                rows += part
                if len(part) >= self.size:
                    end = (part[-1][0], part[-1][1], part[-1][2])
        return rows, end


def _reads(
    q: Mapping[str, Any], partition: int, span: _Span, size: int, ordering_id: str | None
) -> _Read:
    """The queries that read `size` rows of each table from the span's cursor."""
    key = (partition, span.bucket)
    bounds: tuple[Any, ...]
    items: list[Item]
    if ordering_id is None:
        bounds = (*key, *span.lower, span.upper, size)
        items = [(q["load_after"], bounds), (q["status_scan"], bounds)]
        return _Read(partition, span.lower, size, items, 1)
    ms, after_id, after_uk = span.lower
    if after_id and ordering_id >= after_id:
        # Inside the cursor's millisecond by key (no key part is empty), then the later
        # milliseconds filtered: Cassandra takes no equality on a column beside a tuple bound.
        at = (*key, ms, ordering_id, after_uk if ordering_id == after_id else "", size)
        rest = (*key, ms + 1, span.upper, ordering_id, size)
        items = [
            (q["scan_at"], at),
            (q["scan_of"], rest),
            (q["status_scan_at"], at),
            (q["status_scan_of"], rest),
        ]
        return _Read(partition, span.lower, size, items, 2)
    start = ms + 1 if after_id else ms  # past the cursor's millisecond, or the span's start
    bounds = (*key, start, span.upper, ordering_id, size)
    items = [(q["scan_of"], bounds), (q["status_scan_of"], bounds)]
    return _Read(partition, span.lower, size, items, 1)
