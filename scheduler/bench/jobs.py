"""jobs: batch jobs at the size issue 43 names, through the `batch` route's own code.

Workload: 200 jobs x one year of hourly partitions (1 752 000 partitions), each job waiting for
the previous one's hour; global limit 100, job limit 4. The `batch` executor runs with its real
SQLite store in the scratch directory; the engine's log and the runs are stand-ins that record
launches, so what is measured is the batch layer itself (what each task of the `batch:<name>`
queue costs), not the engine underneath (`execute` and `lag` measure that).

Measured:

* materialise: the first load of the file with every partition due (parse, states, the first
  decision and its launches);
* runnable -> started: each run's end is one `ended` task; its time is how long a partition the
  end made runnable waits for its launch (p50, p99, max) while the backlog drains;
* steady state: every job caught up but the last hour; the hour comes (`wake`) and runs down
  the chain of 200 jobs, one end after the other: the time to the last job's launch;
* reload: the same file with one job changed and one added, while runs are in progress (they
  are left untouched: the count of running partitions is checked before and after);
* peak RSS of the process.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from scheduler.batch.durations import format_partition, parse_partition
from scheduler.batch.engine import BatchExecutor
from scheduler.batch.intervals import Intervals
from scheduler.batch.launching import control_task
from scheduler.bench.common import BenchOptions, RssSampler, ScenarioResult, lag_summary
from scheduler.model import Task
from scheduler.stores.batch_sqlite import SqliteBatchStore

START = "2000-01-01 00:00:00"


class _Launches:
    """A client stand-in: keeps the launch requests a decision sends."""

    def __init__(self) -> None:
        self.launched: list[Task] = []

    def schedule_task(self, task: Task) -> Future[int]:
        if task.data.get("op") == "launch":
            self.launched.append(task)
        done: Future[int] = Future()
        done.set_result(0)
        return done


class _NoRuns:
    def get(self, run_id: str) -> None:
        return None


def configuration(jobs: int, hours: int, *, extra: bool = False, delay: str = "15 minutes") -> str:
    end = format_partition(parse_partition(START) + hours * 3_600_000)
    entries: list[dict[str, Any]] = []
    for i in range(jobs + (1 if extra else 0)):
        entries.append(
            {
                "name": f"job{i}",
                "start_partition": START,
                "end_partition": end,
                "increment": "1 hours",
                "command": ["/bin/true", "[[partition]]"],
                "dependencies": [{"name": f"job{i - 1}", "shift": "0 hours"}] if i else [],
                "max_parallelism": 4,
                "on_failure": "retry",
                "retry_delay": delay if i == 0 else "15 minutes",
                "retention": "400 days",
                "stdout_path": "/dev/null",
                "stderr_path": "/dev/null",
            }
        )
    return json.dumps(
        {
            "max_parallelism": 100,
            "scheduler_polling_time": "1000 millis",
            "new_configuration_polling_time": "2 minutes",
            "jobs": entries,
        }
    )


def _op(executor: BatchExecutor, op: str, **data: Any) -> float:
    task = control_task(executor.name, op, 0, op, **data)
    started = time.perf_counter()
    executor(task, None)  # type: ignore[arg-type]
    return time.perf_counter() - started


def _end(executor: BatchExecutor, launch: Task) -> float:
    system = launch.data["system"]
    return _op(
        executor, "ended", job=system["job"], partition=system["partition"],
        attempt=system["attempt"], run_id="bench", status="COMPLETED",
    )  # fmt: skip


def run(options: BenchOptions) -> ScenarioResult:
    jobs, hours = (5, 48) if options.smoke else (200, 8760)
    ends = 50 if options.smoke else options.size or 2000
    end_ms = parse_partition(START) + hours * 3_600_000
    now = [end_ms]
    store = SqliteBatchStore(path=str(options.scratch / "batch.db"))
    store.open()
    client = _Launches()
    executor = BatchExecutor(
        store=store,
        runs=_NoRuns(),  # type: ignore[arg-type]
        client=client,  # type: ignore[arg-type]
        clock=lambda: now[0],
    )
    rss = RssSampler(os.getpid()).start()
    try:
        materialise_s = _op(executor, "load", text=configuration(jobs, hours))
        first_launches = len(client.launched)
        latencies = []
        for _ in range(ends):
            latencies.append(_end(executor, client.launched.pop(0)) * 1000)
        running = _running(store)
        reload_s = _op(
            executor, "load", text=configuration(jobs, hours, extra=True, delay="1 hours")
        )
        running_after = _running(store)
        steady_s, chain = _steady(executor, store, client, jobs, end_ms, now)
    finally:
        rss.stop()
        store.close()
    lag = lag_summary(latencies)
    result = ScenarioResult("jobs")
    result.rows.append(
        {
            "size": f"{jobs} jobs x {hours} partitions",
            "materialise_s": round(materialise_s, 3),
            "p50_ms": round(lag["p50_ms"], 2),
            "p99_ms": round(lag["p99_ms"], 2),
            "max_ms": round(lag["max_ms"], 2),
            "steady_hour_s": round(steady_s, 3),
            "reload_s": round(reload_s, 3),
            "rss_peak_mb": round(rss.peak_mb, 1),
        }
    )
    result.details.update(
        jobs=jobs, hours=hours, partitions=jobs * hours, first_launches=first_launches,
        ends=ends, running_before_reload=len(running), running_after_reload=len(running_after),
        chain_launches=chain,
    )  # fmt: skip
    if not running <= running_after:
        result.notes.append("a reload stopped running partitions: it must not")
    result.notes.append(
        "p50/p99/max: runnable -> started (one run's end to the launches it allows); the "
        "engine's log and the runs are stand-ins: this measures the batch layer's tasks"
    )
    return result


def _steady(
    executor: BatchExecutor,
    store: SqliteBatchStore,
    client: _Launches,
    jobs: int,
    end_ms: int,
    now: list[int],
) -> tuple[float, int]:
    """Every job done but its last hour; the hour comes and runs down the chain."""
    states = store.states()
    caught_up = {}
    for name, state in states.items():
        last = state.grid.count - 1
        caught_up[name] = replace(
            state, done=Intervals([(0, last)]), marked=Intervals(), running={}, failed={}
        )
    store.save_states(caught_up)
    client.launched.clear()
    now[0] = end_ms
    started = time.perf_counter()
    _op(executor, "wake")
    launches = 0
    while client.launched:
        launches += 1
        _end(executor, client.launched.pop(0))
    return time.perf_counter() - started, launches


def _running(store: SqliteBatchStore) -> set[tuple[str, int, int]]:
    """(job, partition, attempt) of every partition running."""
    return {
        (name, ms, run.attempt)
        for name, state in store.states().items()
        for ms, run in state.running.items()
    }
