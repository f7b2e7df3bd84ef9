"""peer: one timer workload on APScheduler 3.x and on our embedded mode, in this process.

Workload: N no-op tasks due at spread times, `rate` a second, the first `LEAD_S` after the
run starts; each is added while the scheduler runs (APScheduler's `add_job` with a date trigger,
our `schedule_task`). Every task records its start; lag = start - due time.

Sides: APScheduler `BackgroundScheduler` with `MemoryJobStore`, with `SQLAlchemyJobStore` on a
SQLite file (both with its default pool of 10 threads, `misfire_grace_time=None` so late jobs run
instead of being dropped, `coalesce=False`), and `EmbeddedScheduler` with its defaults (a SQLite
log and store, pool of 8). They alternate over the repetitions; medians are reported.

Reported: the enqueue rate (adding all N), the rate tasks ran at (N over first due to last start)
and the lag's p50, p99 and max. A side that adds tasks slower than they fall due shows it as lag.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.bench.common import (
    BenchOptions,
    ScenarioResult,
    alternate,
    lag_summary,
    rate,
)

LEAD_S = 2.0
_records: list[tuple[float, float]] = []
_expected = 0
_done = threading.Event()
_lock = threading.Lock()


def apscheduler_job(due: float) -> None:
    """The peer's no-op job (module level, so SQLAlchemyJobStore can store a reference)."""
    record = (due, time.time())
    with _lock:
        _records.append(record)
        if len(_records) >= _expected:
            _done.set()


def _reset(expected: int) -> None:
    global _expected
    with _lock:
        _records.clear()
        _expected = expected
        _done.clear()


def _outcome(count: int, enqueue_s: float, records: list[tuple[float, float]]) -> dict[str, float]:
    lags = [(start - due) * 1000 for due, start in records]
    first_due = min((due for due, _ in records), default=0.0)
    last_start = max((start for _, start in records), default=0.0)
    return {
        "enqueue_per_s": rate(count, enqueue_s),
        "ran_per_s": rate(len(records), last_start - first_due),
        "ran": len(records),
        **{k: v for k, v in lag_summary(lags).items() if k != "count"},
    }


def apscheduler_side(count: int, per_s: float, store: str, scratch: Any) -> dict[str, float]:
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    if store == "memory":
        jobstore: Any = MemoryJobStore()
    else:
        path = scratch / f"apscheduler-{time.time_ns()}.sqlite"
        jobstore = SQLAlchemyJobStore(url=f"sqlite:///{path}")
    peer = BackgroundScheduler(
        jobstores={"default": jobstore},
        job_defaults={"misfire_grace_time": None, "coalesce": False},
        timezone=UTC,
    )
    _reset(count)
    peer.start()
    try:
        base = time.time() + LEAD_S
        started = time.perf_counter()
        for n in range(count):
            due = base + n / per_s
            peer.add_job(
                apscheduler_job,
                "date",
                run_date=datetime.fromtimestamp(due, UTC),
                kwargs={"due": due},
                id=f"job-{n}",
            )
        enqueue_s = time.perf_counter() - started
        _done.wait(LEAD_S + count / per_s + 120)
    finally:
        peer.shutdown(wait=True)
    with _lock:
        records = list(_records)
    return _outcome(count, enqueue_s, records)


def embedded_side(count: int, per_s: float, scratch: Any) -> dict[str, float]:
    from scheduler.bench.probe import MemoryProbe
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.model import Task

    probe = MemoryProbe(count)
    with EmbeddedScheduler(data_dir=scratch / f"peer-{time.time_ns()}", executor=probe) as ours:
        base = datetime.now(UTC) + timedelta(seconds=LEAD_S)
        started = time.perf_counter()
        futures = [
            ours.client.schedule_task(
                Task(f"peer-{n % 1000:04d}", base + timedelta(seconds=n / per_s), f"{n:09d}")
            )
            for n in range(count)
        ]
        for future in futures:
            future.result(120)
        enqueue_s = time.perf_counter() - started
        probe.done.wait(LEAD_S + count / per_s + 120)
    records = [(due / 1000, start / 1000) for due, start in probe.records]
    return _outcome(count, enqueue_s, records)


def run(options: BenchOptions) -> ScenarioResult:
    count = options.pick(3_000, 300)
    per_s = 1_000.0 if not options.smoke else 300.0
    result = ScenarioResult("peer", details={"tasks": count, "due_per_s": per_s, "lead_s": LEAD_S})
    sides: dict[str, Callable[[], dict[str, float]]] = {
        "APScheduler 3 MemoryJobStore": lambda: apscheduler_side(
            count, per_s, "memory", options.scratch
        ),
        "APScheduler 3 SQLAlchemyJobStore (SQLite)": lambda: apscheduler_side(
            count, per_s, "sqlalchemy", options.scratch
        ),
        "scheduler embedded (SQLite log + store)": lambda: embedded_side(
            count, per_s, options.scratch
        ),
    }
    measured = alternate(sides, options.repeat)
    result.details["measured"] = measured
    for side, values in measured.items():
        result.add(
            side=side,
            enqueue_per_s=values["enqueue_per_s"],
            ran_per_s=values["ran_per_s"],
            ran=values["ran"],
            p50_ms=values["p50_ms"],
            p99_ms=values["p99_ms"],
            max_ms=values["max_ms"],
        )
    result.notes.append(
        f"{count:,} tasks due {per_s:,.0f}/s from {LEAD_S:g} s after the start; APScheduler "
        "keeps jobs in its store but has no durable acknowledgement or per-key ordering"
    )
    return result
