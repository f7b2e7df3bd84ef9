"""reload: a partition's new owner's first read of the store, from the bucket's start against
from the reload mark.

N tasks of one partition, due in the current hour, are written and completed (SUCCEEDED: their
schedule rows deleted, so N tombstones in one Cassandra partition), and one task after them
stays pending. The mark is made as a worker makes it (`advanced_mark`, over the store). Then the
first read a new owner makes, both ways, alternating: the engine's `load_tasks` from the bucket's
start (what a new owner did before reload marks), and the mark's stragglers by key plus
`load_tasks` from its cursor. Both must return the one pending task. Reported: milliseconds per
read, and the tombstone cells Cassandra's query trace reports for one read of each.

Cassandra refuses a read past `tombstone_failure_threshold` (100,000 by default); the node that
`scheduler services up` starts raises it to 1,000,000 so that the read from the start can be
timed at 100,000. On a default node that side fails at 100,000: which is the point.
"""

from __future__ import annotations

from typing import Any

from scheduler.actors.task_persistence import BEFORE_ALL, advanced_mark
from scheduler.bench.common import DISTRIBUTED, BenchOptions, ScenarioResult, Stopwatch, alternate
from scheduler.bench.common import now_ms as _now_ms
from scheduler.bench.workers import PARTITIONS, backend, run_settings
from scheduler.engine.reload_mark import ReloadMark
from scheduler.model import ScheduleCursor, Task, TaskKey, TaskState, TaskStatus

PARTITION = 0
CHUNK = 5000
FAR_MS = 2**62


def tombstones_read(store: Any, statement: str, params: tuple[Any, ...]) -> int:
    """Tombstone cells Cassandra reports reading for one of the store's own statements."""
    result = store._runner().session.execute(store._q[statement], params, trace=True)
    counts = [
        int(event.description.split(" and ")[1].split()[0])
        for event in result.get_query_trace().events
        if event.description.startswith("Read ") and "tombstone" in event.description
    ]
    if not counts:
        raise RuntimeError(f"the trace of {statement!r} did not report a read")
    return sum(counts)


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


def run(options: BenchOptions) -> ScenarioResult:
    from scheduler.runtime import open_store

    count = options.pick(100_000, 1_000)
    result = ScenarioResult("reload", details={"completed_tasks": count})
    if not options.wants(DISTRIBUTED):
        result.notes.append("needs --backends kafka-cassandra")
        return result
    with backend(DISTRIBUTED, options, "reload") as run_:
        store = open_store(run_settings(run_), create_schema=True)
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
                def side() -> dict[str, float]:
                    with Stopwatch() as watch:
                        rows = store.load_keys(PARTITION, stragglers)
                        rows += store.load_tasks(PARTITION, after, FAR_MS, 2000)
                    if [row.task for row in rows] != [pending]:
                        raise RuntimeError(f"the first read found {len(rows)} rows, not 1")
                    return {"ms": watch.seconds * 1000}

                return side

            sides = {
                "from the bucket start": first_read(None, ()),
                "from the reload mark": first_read(mark.after, mark.stragglers),
            }
            measured = alternate(sides, options.repeat)
            bucket = pending.scheduled_ms // store.bucket_ms
            tombstones = {
                "from the bucket start": tombstones_read(
                    store, "load_from", (PARTITION, bucket, FAR_MS, 2000)
                ),
                "from the reload mark": tombstones_read(
                    store,
                    "load_after",
                    (PARTITION, mark.after[0] // store.bucket_ms, *mark.after, FAR_MS, 2000),
                ),
            }
        finally:
            store.close()
    for side, values in measured.items():
        result.add(side=side, read_ms=values["ms"], tombstones_read=tombstones[side])
    result.details["measured"] = measured
    result.details["mark_step_ms"] = marking.seconds * 1000
    result.notes.append(
        f"making the mark (a worker does it every 5 s, over what completed since) took "
        f"{marking.seconds * 1000:,.0f} ms here, over all {count:,} tombstones at once"
    )
    result.notes.append(
        "Cassandra refuses a read past tombstone_failure_threshold (100,000 by default)"
    )
    return result
