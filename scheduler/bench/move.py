"""move: `scheduler topic move` of a backlog of N unread tasks (default 1,000,000); rate and RSS.

Kafka only. The tasks are enqueued in bulk (chunks of 10,000, due in a day) with no worker
running, so the group has read none of them. Then `scheduler topic move --to <topic>-moved`
runs as its own process, exactly as an operator runs it, and its resident memory is sampled
every 100 ms. Reported: records moved per second of the command (process start to exit, so it
includes imports and connecting) and its peak RSS. The move reads the backlog as its merge needs
it, with a bounded buffer per partition, so the peak should not grow with N.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from scheduler.bench.backlog import enqueue_backlog
from scheduler.bench.common import (
    DISTRIBUTED,
    BenchOptions,
    RssSampler,
    ScenarioResult,
    Stopwatch,
    median,
    rate,
)
from scheduler.bench.workers import Backend, backend

DUE_IN_MS = 86_400_000


def once(run: Backend, count: int) -> dict[str, Any]:
    from scheduler.client import SchedulerClient
    from scheduler.fleet import scheduler_script
    from scheduler.logs.kafka import KafkaTaskLog

    client = SchedulerClient(log=run.log)
    enqueue_backlog(client, count, prefix="m", due_in_ms=DUE_IN_MS)
    client.close()
    target = f"{run.env['SCHEDULER_TOPIC']}-moved"
    try:
        with Stopwatch() as took:
            process = subprocess.Popen(
                [scheduler_script(), "topic", "move", "--to", target],
                env={**os.environ, **run.env},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            sampler = RssSampler(process.pid).start()
            try:
                out, err = process.communicate(timeout=max(300, count / 1000))
            finally:
                sampler.stop()
        if process.returncode != 0 or f"moved {count} unread records" not in out:
            raise RuntimeError(f"topic move exited {process.returncode}: {out}{err}")
    finally:
        bootstrap = run.env["SCHEDULER_KAFKA_BOOTSTRAP"]
        moved = KafkaTaskLog(bootstrap_servers=bootstrap, topic=target)
        moved.delete_topic()
        moved.close()
    return {
        "records": count,
        "seconds": took.seconds,
        "records_per_s": rate(count, took.seconds),
        "peak_rss_mb": sampler.peak_mb,
    }


def run(options: BenchOptions) -> ScenarioResult:
    result = ScenarioResult("move")
    if not options.wants(DISTRIBUTED):
        result.notes.append("needs --backends kafka-cassandra")
        return result
    count = options.pick(1_000_000, 2_000)
    runs = []
    for _ in range(options.repeat):
        with backend(DISTRIBUTED, options, "move") as run_:
            runs.append(once(run_, count))
    result.details["runs"] = runs
    result.add(
        backend=DISTRIBUTED,
        records=count,
        records_per_s=median([r["records_per_s"] for r in runs]),
        seconds=median([r["seconds"] for r in runs]),
        rss_peak_mb=median([r["peak_rss_mb"] for r in runs]),
    )
    result.notes.append(
        "the whole command, process start to exit; the unread records are buffered per "
        "partition (100,000 records at most in all), so the peak RSS does not grow with N"
    )
    return result
