"""backlog: N overdue tasks (default 1,000,000) drained by a worker subprocess; rate and RSS.

The tasks are enqueued (bulk, chunks of 10,000, each chunk due when it is created) with no
worker running, so they all wait in the log. Then one `scheduler worker` process starts with the
probe executor, and its resident memory (with any children) is sampled every 100 ms until the
probe has seen every task start. Before that, a worker on an empty backend gives the idle RSS
("before drain") of the same process.

Reported: the drain rate from the worker's first task start to its last (and from the process
start, which adds imports and the group join), and the peak RSS against issue 2's bound.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from scheduler.bench.common import (
    DISTRIBUTED,
    EMBEDDED,
    BenchOptions,
    RssSampler,
    ScenarioResult,
    Stopwatch,
    now_ms,
    rate,
)
from scheduler.bench.enqueue import make_tasks
from scheduler.bench.probe import probe_files, wait_for_count
from scheduler.bench.workers import backend

CHUNK = 10_000


def starts(prefix: Path) -> tuple[int, int, int]:
    """(count, first start, last start) of the probe's records, read line by line."""
    count, first, last = 0, 2**63, 0
    for path in probe_files(prefix):
        with path.open("rb") as stream:
            for line in stream:
                start = int(line[14:27])
                count += 1
                first = min(first, start)
                last = max(last, start)
    return count, first, last


def enqueue_backlog(client: Any, count: int, *, prefix: str, due_in_ms: int = 0) -> None:
    """`count` tasks through `schedule_tasks` in chunks of `CHUNK`, each chunk built as it is
    sent (a million tasks are never in memory at once) and due `due_in_ms` after that; returns
    once every chunk is acknowledged."""
    futures = [
        client.schedule_tasks(
            make_tasks(min(CHUNK, count - n), due_ms=now_ms() + due_in_ms, prefix=f"{prefix}{n}")
        )
        for n in range(0, count, CHUNK)
    ]
    for future in futures:
        future.result(600)


def idle_rss(kind: str, options: BenchOptions) -> float:
    """The resident MB of a worker that owns every partition and has nothing to do."""
    with backend(kind, options, "backlog-idle") as run:
        worker = run.start_worker("idle")
        run.wait_assigned()
        sampler = RssSampler(worker.pid).start()
        time.sleep(2.0)
        sampler.stop()
        return sampler.peak_mb


def drain(kind: str, options: BenchOptions, count: int) -> dict[str, Any]:
    from scheduler.client import SchedulerClient

    with backend(kind, options, "backlog") as run:
        client = SchedulerClient(log=run.log)
        with Stopwatch() as enqueue:
            enqueue_backlog(client, count, prefix="b")
        client.close()
        started_ms = now_ms()
        worker = run.start_worker("drainer")
        sampler = RssSampler(worker.pid).start()
        try:
            reached = wait_for_count(
                run.probe, count, timeout_s=max(300, count / 300), alive=lambda: worker.alive
            )
        finally:
            sampler.stop()
        ran, first, last = starts(run.probe)
        if reached < count:
            raise TimeoutError(f"the worker ran {ran} of {count} tasks in time ({run.directory})")
        timeline = sampler.samples[:: max(1, len(sampler.samples) // 400)]
        return {
            "tasks": count,
            "enqueue_per_s": rate(count, enqueue.seconds),
            "drain_per_s": rate(count, (last - first) / 1000),
            "drain_from_process_start_per_s": rate(count, (last - started_ms) / 1000),
            "drain_s": (last - first) / 1000,
            "peak_rss_mb": sampler.peak_mb,
            "rss_timeline": [(round(t, 2), round(rss / 2**20, 1)) for t, rss in timeline],
        }


def run(options: BenchOptions) -> ScenarioResult:
    result = ScenarioResult("backlog")
    for kind in (EMBEDDED, DISTRIBUTED):
        if not options.wants(kind):
            continue
        count = options.pick(1_000_000 if kind == EMBEDDED else 100_000, 2_000)
        try:
            before = idle_rss(kind, options)
            measured = drain(kind, options, count)
        except Exception as error:  # a server restarted under us: keep the other backend's
            result.backend_failed(kind, error)
            continue
        measured["idle_rss_mb"] = before
        result.details[kind] = measured
        result.add(
            backend=kind,
            tasks=count,
            enqueue_per_s=measured["enqueue_per_s"],
            drain_per_s=measured["drain_per_s"],
            incl_start_per_s=measured["drain_from_process_start_per_s"],
            rss_idle_mb=before,
            rss_peak_mb=measured["peak_rss_mb"],
        )
    result.notes.append("issue 2's target: 1,000,000 overdue tasks drain in under 500 MB RSS")
    result.notes.append("one run per backend (a million tasks take minutes); --repeat is ignored")
    return result
