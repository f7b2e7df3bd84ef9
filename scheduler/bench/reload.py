"""reload: a partition's new owner's first read of the store, from the bucket's start against
from the reload mark.

N tasks of one partition, due in the current hour, are written and completed (SUCCEEDED: their
schedule rows deleted, so N tombstones in one Cassandra partition), and one task after them
stays pending. The mark is made as a worker makes it (`advanced_mark`, over the store). Then the
first read a new owner makes, both ways, alternating: the engine's `load_tasks` from the bucket's
start (a new owner without a mark: its reads go in spans of `read_slice_ms`), and the mark's
stragglers by key plus `load_tasks` from its cursor. Both must return the one pending task.
Reported: milliseconds per read; the queries each made, and the tombstone cells Cassandra's query
trace reports for them, in all and in the worst one; and what one query over the whole bucket
reads (the store's read before slices), or Cassandra's refusal of it.

Cassandra refuses a read past `tombstone_failure_threshold` (100,000 by default, as on the node
`scheduler services up` starts): at N = 100,000 the one query over the bucket is at that line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from scheduler.actors.task_persistence import BEFORE_ALL, advanced_mark
from scheduler.bench.common import DISTRIBUTED, BenchOptions, ScenarioResult, Stopwatch, alternate
from scheduler.bench.common import now_ms as _now_ms
from scheduler.bench.workers import PARTITIONS, backend, run_settings
from scheduler.engine.reload_mark import ReloadMark
from scheduler.model import ScheduleCursor, Task, TaskKey, TaskState, TaskStatus

PARTITION = 0
CHUNK = 5000
FAR_MS = 2**62
T = TypeVar("T")


def tombstones_read(store: Any, statement: Any, params: tuple[Any, ...]) -> int:
    """Tombstone cells Cassandra reports reading for one of the store's own statements (its name
    or the prepared statement), run once more with tracing."""
    if isinstance(statement, str):
        statement = store._q[statement]
    result = store._runner().session.execute(statement, params, trace=True)
    counts = [
        int(event.description.split(" and ")[1].split()[0])
        for event in result.get_query_trace().events
        if event.description.startswith("Read ") and "tombstone" in event.description
    ]
    if not counts:
        raise RuntimeError(f"the trace of {statement!r} did not report a read")
    return sum(counts)


def tombstones_per_read(store: Any, action: Callable[[], T]) -> tuple[T, list[int]]:
    """`action()`'s result, and the tombstone cells of each read of the schedule and status
    tables the store made for it (each read run once more, traced, afterwards)."""
    runner = store._runner()
    reads: list[tuple[Any, tuple[Any, ...]]] = []
    one, many = runner.one, runner.many

    def recording_one(statement: Any, params: Any, what: str) -> Any:
        reads.append((statement, params))
        return one(statement, params, what)

    def recording_many(items: Any, what: str) -> Any:
        reads.extend(items)
        return many(items, what)

    runner.one, runner.many = recording_one, recording_many
    try:
        value = action()
    finally:
        del runner.one, runner.many
    tables = (f"FROM {store.keyspace}.schedule ", f"FROM {store.keyspace}.status ")
    return value, [
        tombstones_read(store, statement, params)
        for statement, params in reads
        if any(table in getattr(statement, "query_string", "") for table in tables)
    ]


def completed_partition(store: Any, count: int) -> tuple[list[Task], Task]:
    """`count` completed tasks in one bucket of the partition, then one pending task."""
    width = store.bucket_ms
    start = max(_now_ms() // width * width, _now_ms() - width // 2)  # all in this bucket
    step = max(1, (width // 2 - 1) // (count + 1))
    tasks = [
        Task.from_key(TaskKey.from_ms(f"o{n % 100}", start + n * step, f"u{n}"), {})
        for n in range(count)
    ]
    for n in range(0, count, CHUNK):
        chunk = tasks[n : n + CHUNK]
        store.write_tasks(PARTITION, chunk)
        store.record_statuses(PARTITION, [TaskStatus(t.key, TaskState.SUCCEEDED) for t in chunk])
    pending = Task.from_key(TaskKey.from_ms("pending", start + (count + 1) * step, "p"), {})
    store.write_tasks(PARTITION, [pending])
    return tasks, pending


def whole_bucket_read(store: Any, bucket: int) -> str:
    """What one query over the bucket from its start reads (the store's reads before
    `read_slice_ms`): its tombstones, or Cassandra's refusal."""
    params = (PARTITION, bucket, bucket * store.bucket_ms, "", "", FAR_MS, 2000)
    try:
        return f"{tombstones_read(store, 'load_after', params):,} tombstones"
    except Exception as error:  # the node's tombstone_failure_threshold, the point
        return f"refused ({type(error).__name__}: {str(error)[:200]})"


def run(options: BenchOptions) -> ScenarioResult:
    from scheduler.runtime import open_store

    count = options.pick(100_000, 1_000)
    result = ScenarioResult("reload", details={"completed_tasks": count})
    if not options.wants(DISTRIBUTED):
        result.notes.append("needs --backends kafka-cassandra")
        return result
    with backend(DISTRIBUTED, options, "reload") as run_:
        settings = run_settings(run_)
        store = open_store(settings, create_schema=True)
        try:
            store.claim_meta("partition_count", str(PARTITIONS))
            tasks, pending = completed_partition(store, count)
            with Stopwatch() as marking:
                mark = advanced_mark(
                    store, PARTITION, ReloadMark(BEFORE_ALL), pending.scheduled_ms - 1
                )
            if mark.stragglers or mark.after <= tasks[-1].key.cursor:
                raise RuntimeError(f"the mark did not step over the completed tasks: {mark}")

            def first_read(after: ScheduleCursor | None, stragglers: tuple[TaskKey, ...]) -> Any:
                def read() -> list[Any]:
                    # As a new tree's first load: up to now plus the lookahead (the pending
                    # task is due by now in the second half of an hour, later in the first).
                    until = max(_now_ms(), pending.scheduled_ms) + settings.lookahead_ms
                    return store.load_keys(PARTITION, stragglers) + store.load_tasks(
                        PARTITION, after, until, 2000
                    )

                def side() -> dict[str, float]:
                    with Stopwatch() as watch:
                        rows = read()
                    if [row.task for row in rows] != [pending]:
                        raise RuntimeError(f"the first read found {len(rows)} rows, not 1")
                    return {"ms": watch.seconds * 1000}

                return side, read

            reads = {
                "from the bucket start, in slices": first_read(None, ()),
                "from the reload mark": first_read(mark.after, mark.stragglers),
            }
            measured = alternate({side: r[0] for side, r in reads.items()}, options.repeat)
            traced = {side: tombstones_per_read(store, r[1])[1] for side, r in reads.items()}
            whole = whole_bucket_read(store, pending.scheduled_ms // store.bucket_ms)
        finally:
            store.close()
    for side, values in measured.items():
        result.add(
            side=side,
            read_ms=values["ms"],
            queries=len(traced[side]),
            tombstones_read=sum(traced[side]),
            most_in_one_query=max(traced[side], default=0),
        )
    result.details["measured"] = measured
    result.details["tombstones_per_query"] = traced
    result.details["mark_step_ms"] = marking.seconds * 1000
    result.details["one_query_over_the_bucket"] = whole
    result.notes.append(
        f"making the mark (a worker does it every 5 s, over what completed since) took "
        f"{marking.seconds * 1000:,.0f} ms here, over all {count:,} tombstones at once"
    )
    result.notes.append(
        f"one query over the whole bucket, as the store read before slices: {whole}; Cassandra "
        "refuses a read past tombstone_failure_threshold (100,000 by default)"
    )
    return result
