"""jobs: batch jobs at the size issue 43 names, on the real engine.

Workload: 200 jobs x one year of hourly partitions (1 752 000 partitions), each job waiting for
the previous one's hour; global limit 100, job limit 4; every partition runs `/bin/true` as a
real command. A `scheduler worker` process (executor `auto`, `batch_file` set, polling the file
every second) runs them on the embedded log + SQLite store, or on Kafka + Cassandra with
`--backends kafka-cassandra` (a fresh topic and keyspace per run). The bench process writes the
file and watches the batch store and the run store, as an operator would.

Measured, on a fresh deployment:

* materialise: the file written -> its configuration in force and the runs of its first
  decision started (every partition is due);
* drain: partitions done per second while the backlog runs (`--size` seconds; 60 by default);
* reload: the file rewritten (one job changed, one added) while runs are in progress -> the new
  configuration in force; the runs in progress before it must end as they would have
  (SUCCEEDED), none stopped;

and on a second deployment whose store holds every job done but its last hour, that hour due a
few seconds after the worker started:

* steady state: the hour runs down the chain of 200 jobs; runnable -> started of each run is
  its start behind the end of the run it waited for (the previous job's same hour; for the
  first job, the hour's due instant): p50, p99, max; and the hour's time from due to its last
  run's end;
* peak RSS of the worker process, the largest of both deployments. Its commands are not
  counted: each is forked from the worker, and until it execs `/bin/true` the child shares
  the worker's pages, which psutil would count twice.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from scheduler.batch.durations import format_partition
from scheduler.bench.common import (
    EMBEDDED,
    BenchOptions,
    RssSampler,
    ScenarioResult,
    lag_summary,
    now_ms,
)
from scheduler.bench.workers import Backend, backend, run_settings

HOUR_MS = 3_600_000
STEADY_LEAD_MS = 20_000
"""How long after the second deployment's worker starts the last hour becomes due (the
worker starts within it; a smoke run takes half)."""
T = TypeVar("T")


def configuration(
    jobs: int, hours: int, start_ms: int, *, extra: bool = False, delay: str = "15 minutes"
) -> str:
    """The jobs file: `jobs` hourly jobs from `start_ms` (`extra`: one job more), a chain."""
    start = format_partition(start_ms)
    end = format_partition(start_ms + hours * HOUR_MS)
    entries: list[dict[str, Any]] = []
    for i in range(jobs + (1 if extra else 0)):
        entries.append(
            {
                "name": f"job{i}",
                "start_partition": start,
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
            "new_configuration_polling_time": "1 seconds",
            "jobs": entries,
        }
    )


def _write(path: Path, text: str) -> None:
    """Whole or not at all: the worker's poll never reads half a file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def _wait(check: Callable[[], T], timeout_s: float, what: str, every_s: float = 0.05) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout_s:.0f} s")
        time.sleep(every_s)


class _Observer:
    """The deployment's batch store and run store, opened as the CLI opens them."""

    def __init__(self, run: Backend) -> None:
        from scheduler.batch.runtime import open_batch_store
        from scheduler.programs.runtime import open_run_store
        from scheduler.runtime import open_store

        settings = run_settings(run)
        self.store = open_store(settings, create_schema=True)
        self.batch = open_batch_store(settings, self.store, create_schema=True)
        self.runs = open_run_store(settings, self.store, create_schema=True)

    def close(self) -> None:
        self.runs.close()
        self.batch.close()
        self.store.close()

    def text(self) -> str | None:
        stored = self.batch.configuration()
        return None if stored is None else stored.text

    def running(self) -> set[tuple[str, int, int]]:
        """(job, partition, attempt) of every partition running."""
        return {
            (name, ms, run.attempt)
            for name, state in self.batch.states().items()
            for ms, run in state.running.items()
        }

    def started(self) -> bool:
        return any(run.started_ms is not None for run in self.runs.list_runs(limit=10))

    def done(self) -> int:
        return sum(len(state.done) for state in self.batch.states().values())


def _start_worker(run: Backend, file: Path) -> Any:
    worker = run.start_worker(
        "jobs-worker",
        SCHEDULER_BATCH_FILE=str(file),
        SCHEDULER_BATCH_POLL_S="1",
        SCHEDULER_POOL_SIZE="16",
    )
    run.wait_assigned()
    return worker


def _backlog(run: Backend, jobs: int, hours: int, drain_s: float) -> dict[str, Any]:
    """Materialise, drain and reload on a fresh deployment."""
    file = run.directory / "jobs.json"
    start = (now_ms() // 1000) * 1000 - (hours + 1) * HOUR_MS  # every partition due
    observer = _Observer(run)
    try:
        worker = _start_worker(run, file)
        rss = RssSampler(worker.pid, children=False).start()
        try:
            text = configuration(jobs, hours, start)
            written = time.perf_counter()
            _write(file, text)
            _wait(lambda: observer.text() == text, 120, "the first load")
            applied_s = time.perf_counter() - written
            first = _wait(observer.running, 120, "the first decision's launches")
            _wait(observer.started, 120, "the first run's start")
            materialise_s = time.perf_counter() - written
            done_before, drain_from = observer.done(), time.perf_counter()
            time.sleep(drain_s)
            done = observer.done() - done_before
            drained_s = time.perf_counter() - drain_from
            running = observer.running()
            new = configuration(jobs, hours, start, extra=True, delay="1 hours")
            written = time.perf_counter()
            _write(file, new)
            _wait(lambda: observer.text() == new, 120, "the reload")
            reload_s = time.perf_counter() - written
            untouched = _untouched(observer, running)
        finally:
            rss.stop()
    finally:
        observer.close()
    return {
        "applied_s": applied_s,
        "materialise_s": materialise_s,
        "first_launches": len(first),
        "drained": done,
        "drain_per_s": done / drained_s if drained_s > 0 else math.nan,
        "reload_s": reload_s,
        "running_before_reload": len(running),
        "running_untouched": untouched,
        "rss_peak_mb": rss.peak_mb,
    }


def _untouched(observer: _Observer, running: set[tuple[str, int, int]]) -> int:
    """How many of `running` ended SUCCEEDED in the attempt they had (waited for, 120 s)."""

    def ended() -> list[int]:
        """[how many SUCCEEDED] once they all ended, else []."""
        count = 0
        for job, partition, attempt in running:
            history = observer.batch.attempts(job, partition=partition, limit=5)
            mine = [a for a in history if a.attempt == attempt]
            if not mine or str(mine[0].status) == "RUNNING":
                return []
            count += str(mine[0].status) == "SUCCEEDED"
        return [count]

    try:
        return _wait(ended, 120, "the runs in progress at the reload to end", every_s=0.5)[0]
    except TimeoutError:
        return 0


def _steady(run: Backend, jobs: int, hours: int, lead_ms: int) -> dict[str, Any]:
    """Every job done but its last hour, which becomes due after the worker started."""
    from scheduler.batch.config import parse_configuration
    from scheduler.batch.intervals import Intervals
    from scheduler.batch.state import new_state
    from scheduler.batch.store import StoredConfiguration

    observer = _Observer(run)
    try:
        due = (now_ms() + lead_ms) // 1000 * 1000
        start = due - hours * HOUR_MS
        text = configuration(jobs, hours, start)
        config = parse_configuration(text)
        observer.batch.save_configuration(StoredConfiguration(text, now_ms(), source="bench"))
        observer.batch.save_states(
            {
                job.name: replace(new_state(job), done=Intervals([(0, hours - 1)]))
                for job in config.jobs
            }
        )
        worker = _start_worker(run, run.directory / "never-written.json")
        rss = RssSampler(worker.pid, children=False).start()
        last = start + (hours - 1) * HOUR_MS
        try:
            _wait(
                lambda: all(len(s.done) == hours for s in observer.batch.states().values()),
                lead_ms / 1000 + 60 + jobs,
                "the last hour down the chain",
                every_s=0.5,
            )
        finally:
            rss.stop()
        runs = []
        for job in config.jobs:
            attempt = observer.batch.attempts(job.name, partition=last, limit=1)[0]
            runs.append(observer.runs.get(attempt.run_id))
    finally:
        observer.close()
    latencies = []
    previous_end = due
    for found in runs:
        assert found is not None and found.started_ms is not None and found.ended_ms is not None
        latencies.append(float(found.started_ms - previous_end))
        previous_end = found.ended_ms
    return {
        "hour_s": (previous_end - due) / 1000,
        "runs": len(runs),
        "rss_peak_mb": rss.peak_mb,
        **lag_summary(latencies),
    }


def run(options: BenchOptions) -> ScenarioResult:
    jobs, hours = (5, 48) if options.smoke else (200, 8760)
    drain_s = float(options.size or (1 if options.smoke else 60))
    result = ScenarioResult("jobs")
    for kind in options.backends:
        try:
            with backend(kind, options, "jobs", executor="auto") as deployment:
                backlog = _backlog(deployment, jobs, hours, drain_s)
            with backend(kind, options, "jobs-steady", executor="auto") as deployment:
                lead = STEADY_LEAD_MS // 2 if options.smoke else STEADY_LEAD_MS
                steady = _steady(deployment, jobs, hours, lead)
        except Exception as error:
            result.backend_failed(kind, error)
            continue
        result.add(
            backend=kind if kind != EMBEDDED else "embedded (SQLite)",
            size=f"{jobs} jobs x {hours} partitions",
            materialise_s=round(backlog["materialise_s"], 2),
            drain_per_s=round(backlog["drain_per_s"], 1),
            p50_ms=round(steady["p50_ms"], 1),
            p99_ms=round(steady["p99_ms"], 1),
            max_ms=round(steady["max_ms"], 1),
            steady_hour_s=round(steady["hour_s"], 2),
            reload_s=round(backlog["reload_s"], 2),
            rss_peak_mb=round(max(backlog["rss_peak_mb"], steady["rss_peak_mb"]), 1),
        )
        result.details[kind] = {"backlog": backlog, "steady": steady}
        if backlog["running_untouched"] < backlog["running_before_reload"]:
            result.notes.append(
                f"{kind}: {backlog['running_untouched']} of the "
                f"{backlog['running_before_reload']} runs in progress at the reload ended "
                "SUCCEEDED: a reload must leave them all running"
            )
    result.details.update(jobs=jobs, hours=hours, partitions=jobs * hours, drain_s=drain_s)
    result.notes.append(
        "a worker process runs every partition as a real command (/bin/true); p50/p99/max: "
        "runnable -> started down the chain (a run's start behind the end of the run it waited "
        "for); reload_s includes up to 1 s of file polling; targets: p99 < 1 s, reload < 5 s, "
        "RSS < 300 MB"
    )
    return result
