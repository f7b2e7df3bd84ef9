"""How long the batch core's runnable decision takes at the size issue 43 names: 200 jobs x one
year of hourly partitions (1.75 M partitions), each job waiting on the previous one's hour.

    .venv/bin/python scripts/batch_decide_bench.py

Prints the median and worst time of `runnable` (and of one partition's start and end) in three
states of the year, and the memory the job states take. Pure CPU: no engine, no servers.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from scheduler.batch import (
    Configuration,
    JobState,
    finish,
    format_partition,
    new_state,
    parse_configuration,
    parse_partition,
    runnable,
    start,
)
from scheduler.batch.intervals import Intervals

JOBS = 200
HOURS = 8760
START = "2000-01-01 00:00:00"
END = "2000-12-31 00:00:00"  # 365 days: 8 760 hourly partitions per job


def configuration() -> Configuration:
    jobs: list[dict[str, Any]] = []
    for i in range(JOBS):
        dependencies = [{"name": f"job{i - 1}", "shift": "0 hours"}] if i else []
        jobs.append(
            {
                "name": f"job{i}",
                "start_partition": START,
                "end_partition": END,
                "increment": "1 hours",
                "command": ["/bin/true", "[[partition]]"],
                "dependencies": dependencies,
                "max_parallelism": 4,
                "on_failure": "retry",
                "retry_delay": "15 minutes",
                "retention": "30 days",
                "stdout_path": "/dev/null",
                "stderr_path": "/dev/null",
            }
        )
    text = {
        "max_parallelism": 100,
        "scheduler_polling_time": "1000 millis",
        "new_configuration_polling_time": "2 minutes",
        "jobs": jobs,
    }
    return parse_configuration(text)


def timed(action: Callable[[], object], repeat: int = 20) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000, max(times) * 1000


def states_where(
    config: Configuration, done: Callable[[int], list[tuple[int, int]]]
) -> dict[str, JobState]:
    return {
        job.name: JobState(job.name, new_state(job).grid, done=Intervals(done(i)))
        for i, job in enumerate(config.jobs)
    }


def main() -> None:
    config = configuration()
    now = parse_partition(END) + 3_600_000
    total = sum(state.grid.count for state in states_where(config, lambda i: []).values())
    print(f"{JOBS} jobs, {total:,} partitions, every one due at {format_partition(now)}")
    scenarios = {
        "nothing run yet (a first start)": lambda i: [],
        "caught up but the chain staggered (job i is i hours behind)": lambda i: [(0, HOURS - i)],
        "a failed hour every 100 in every job (17 500 gaps)": lambda i: [
            (lo, min(lo + 99, HOURS)) for lo in range(0, HOURS, 100)
        ],
    }
    for label, done in scenarios.items():
        states = states_where(config, done)
        median, worst = timed(lambda: runnable(config, states, now))
        started = len(runnable(config, states, now))
        print(
            f"- {label}: runnable {median:.1f} ms median, {worst:.1f} ms worst, {started} to start"
        )
    states = states_where(
        config, scenarios["caught up but the chain staggered (job i is i hours behind)"]
    )
    job = config.jobs[10]
    partition = states[job.name].grid.at(HOURS - 10)

    def one_run() -> None:
        state = start(states[job.name], job, partition, now)
        finish(state, partition, True, now)

    median, worst = timed(one_run, 200)
    print(f"- one partition started and ended: {median * 1000:.0f} us median")
    tracemalloc.start()
    kept = states_where(config, scenarios["a failed hour every 100 in every job (17 500 gaps)"])
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    print(f"- job states with 17 500 gaps: {size / 1e6:.1f} MB ({len(kept)} jobs)")


if __name__ == "__main__":
    main()
