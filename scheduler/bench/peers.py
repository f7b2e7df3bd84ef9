"""The durable schedulers `scheduler bench peer` compares, each behind one small harness.

Every side runs the same workloads (see `scheduler.bench.peer`):

* `suite`: (a) a burst of N tasks due at once, (b) a steady rate at fractions of the burst's
  rate with every task due 1 s after it is sent, (c) a backlog of tasks due over the next day;
* `kill`: (d) N tasks due now with a little work each, the worker SIGKILLed a third of the way
  through and a replacement started at once; which tasks never ran, which ran twice, and when.

The sides: APScheduler 3 (memory, SQLite and PostgreSQL stores; in this process), Celery `eta`
tasks on Redis (a `celery worker` subprocess), db-scheduler and Quartz (the Java driver in
scheduler/bench/java, on PostgreSQL) and this scheduler (a `scheduler worker` subprocess, on the
embedded backends or on Kafka + Cassandra). The servers are private (`scheduler.bench.servers`).

Task records for (d) are appended by the worker with one `write` per task to `<sink>.<pid>`
("id start_ms"), so a SIGKILL loses no record of a task that ran.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scheduler.bench.common import lag_summary, now_ms, rate

SINK_ENV = "SCHEDULER_BENCH_SINK"
WORK_ENV = "SCHEDULER_BENCH_WORK_MS"
HOUR_MS = 3_600_000


# -- the append-only sink of workload (d) ----------------------------------------------------------


def sink_record(task_id: str) -> None:
    """Append "id start_ms" to this process's sink file, then do the configured work."""
    line = f"{task_id} {now_ms()}\n".encode()
    fd = os.open(f"{os.environ[SINK_ENV]}.{os.getpid()}", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    work_ms = int(os.environ.get(WORK_ENV, "0"))
    if work_ms:
        time.sleep(work_ms / 1000)


def sink_executor(task: Any, context: Any) -> None:
    """This scheduler's executor for (d):
    `SCHEDULER_EXECUTOR=scheduler.bench.peers:sink_executor`."""
    sink_record(task.key.uniqueness_key)


def read_sink(prefix: Path) -> list[tuple[str, int]]:
    records = []
    for path in sorted(prefix.parent.glob(prefix.name + ".*")):
        for line in path.read_text(encoding="ascii").splitlines():
            task_id, _, start = line.rpartition(" ")
            if task_id:
                records.append((task_id, int(start)))
    return records


def _distinct(prefix: Path) -> int:
    return len({task_id for task_id, _ in read_sink(prefix)})


def kill_test(
    *,
    count: int,
    sink: Path,
    enqueue: Callable[[], None],
    start_worker: Callable[[str], Any],
    kill: Callable[[Any], None],
    stop: Callable[[Any], None],
    timeout_s: float,
) -> dict[str, float]:
    """Workload (d): enqueue, run a worker, SIGKILL it a third of the way, start another."""
    enqueue()
    first = start_worker("first")
    workers = [first]
    try:
        deadline = time.monotonic() + timeout_s
        while _distinct(sink) < count / 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        before_kill = _distinct(sink)
        killed_ms = now_ms()
        kill(first)
        workers.append(start_worker("second"))
        recovered_ms = math.nan
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if _distinct(sink) >= count:
                recovered_ms = now_ms()
                break
            time.sleep(0.05)
        time.sleep(0.5)  # a task still running on the second worker may run twice: let it show
    finally:
        for worker in workers[1:]:
            stop(worker)
    records = read_sink(sink)
    ids = {task_id for task_id, _ in records}
    after = [start for _, start in records if start > killed_ms]
    return {
        "tasks": count,
        "ran_before_kill": before_kill,
        "lost": count - len(ids),
        "ran_twice": len(records) - len(ids),
        "resume_s": (min(after) - killed_ms) / 1000 if after else math.nan,
        "recover_s": (recovered_ms - killed_ms) / 1000,
        "waited_s": timeout_s,
    }


# -- the in-process workloads (a)-(c) over any side ------------------------------------------------


@dataclass
class Harness:
    """How the workloads reach one side: send tasks, count and read what ran."""

    send: Callable[[int, int], None]
    """Schedule task number n due at the given epoch ms."""
    records: Callable[[], list[tuple[int, int]]]
    """(due_ms, start_ms) of every task run since the harness started."""
    count: Callable[[], int]
    flush: Callable[[], object] = lambda: None
    send_burst: Callable[[int, int, int], None] | None = None
    """Optional bulk path: (first n, how many, due_ms)."""
    storage_bytes: Callable[[], float] | None = None
    memory_bytes: Callable[[], float] | None = None
    notes: list[str] = field(default_factory=list)


def _wait(harness: Harness, expected: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while (reached := harness.count()) < expected and time.monotonic() < deadline:
        time.sleep(0.02)
    return reached


def burst(harness: Harness, count: int, timeout_s: float) -> dict[str, float]:
    before = harness.count()
    started = now_ms()
    if harness.send_burst is not None:
        harness.send_burst(0, count, started)
    else:
        for n in range(count):
            harness.send(n, started)
    harness.flush()
    enqueued = now_ms()
    _wait(harness, before + count, timeout_s)
    records = harness.records()[before:]
    last = max((start for _, start in records), default=started)
    return {
        "tasks": count,
        "ran": len(records),
        "enqueue_per_s": rate(count, (enqueued - started) / 1000),
        "ran_per_s": rate(len(records), (last - started) / 1000),
    }


def steady(harness: Harness, per_s: float, seconds: float, drain_s: float) -> dict[str, float]:
    count = max(1, int(per_s * seconds))
    before = harness.count()
    origin = time.perf_counter()
    for n in range(count):
        pause = origin + n / per_s - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        harness.send(10_000_000 + n, now_ms() + 1000)
    harness.flush()
    _wait(harness, before + count, drain_s)
    records = harness.records()[before:]
    summary = lag_summary([start - due for due, start in records])
    return {
        "offered_per_s": per_s,
        "tasks": count,
        "ran": summary["count"],
        "p50_ms": summary["p50_ms"],
        "p99_ms": summary["p99_ms"],
    }


def backlog(harness: Harness, count: int) -> dict[str, float]:
    storage = harness.storage_bytes() if harness.storage_bytes else math.nan
    memory = harness.memory_bytes() if harness.memory_bytes else math.nan
    before = harness.count()
    base = now_ms() + HOUR_MS
    started = time.perf_counter()
    if harness.send_burst is not None:
        chunk = 1000
        for first in range(0, count, chunk):
            harness.send_burst(
                20_000_000 + first, min(chunk, count - first), base + first * 24 * HOUR_MS // count
            )
    else:
        for n in range(count):
            harness.send(20_000_000 + n, base + n * 24 * HOUR_MS // count)
    harness.flush()
    took = time.perf_counter() - started
    time.sleep(1.0)  # let workers fetch what they hold in memory (Celery's eta tasks)
    return {
        "tasks": count,
        "enqueue_per_s": rate(count, took),
        "storage_mb": ((harness.storage_bytes() - storage) / 2**20)
        if harness.storage_bytes
        else math.nan,
        "memory_mb": ((harness.memory_bytes() - memory) / 2**20)
        if harness.memory_bytes
        else math.nan,
        "ran_early": harness.count() - before,
    }


def suite(
    harness: Harness,
    *,
    burst_n: int,
    levels: tuple[float, ...],
    steady_s: float,
    drain_s: float,
    backlog_n: int,
) -> dict[str, Any]:
    """(a), then (b) at each level of (a)'s rate, then (c) (nothing of it falls due)."""
    measured = burst(harness, burst_n, timeout_s=max(60.0, burst_n / 50))
    maximum = measured["ran_per_s"]
    levels_out = [steady(harness, level * maximum, steady_s, drain_s) for level in levels]
    return {"burst": measured, "steady": levels_out, "backlog": backlog(harness, backlog_n)}


# -- APScheduler 3 ---------------------------------------------------------------------------------

_aps_records: list[tuple[int, int]] = []
_aps_lock = threading.Lock()


def apscheduler_job(due_ms: int) -> None:
    """APScheduler's no-op job (module level, so SQLAlchemyJobStore can store a reference)."""
    record = (due_ms, now_ms())
    with _aps_lock:
        _aps_records.append(record)


def aps_sink_job(task_id: str) -> None:
    sink_record(task_id)


def _aps_scheduler(url: str | None) -> Any:
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    store: Any = MemoryJobStore() if url is None else SQLAlchemyJobStore(url=url)
    return BackgroundScheduler(
        jobstores={"default": store},
        job_defaults={"misfire_grace_time": None, "coalesce": False},
        timezone=UTC,
    )


@contextmanager
def apscheduler(url: str | None, storage: Callable[[], float] | None) -> Iterator[Harness]:
    """APScheduler 3's BackgroundScheduler in this process, on a memory or SQLAlchemy store."""
    import psutil

    peer = _aps_scheduler(url)
    with _aps_lock:
        _aps_records.clear()
    peer.start()
    me = psutil.Process()

    def send(n: int, due_ms: int) -> None:
        peer.add_job(
            apscheduler_job,
            "date",
            run_date=datetime.fromtimestamp(due_ms / 1000, UTC),
            kwargs={"due_ms": due_ms},
            id=f"job-{n}",
        )

    def records() -> list[tuple[int, int]]:
        with _aps_lock:
            return list(_aps_records)

    try:
        yield Harness(
            send=send,
            records=records,
            count=lambda: len(_aps_records),
            storage_bytes=storage,
            memory_bytes=lambda: float(me.memory_info().rss),
        )
    finally:
        peer.shutdown(wait=False)


def apscheduler_worker() -> None:
    """(d)'s APScheduler worker process: its store from the environment, until killed."""
    url = os.environ.get("BENCH_APS_URL") or None
    peer = _aps_scheduler(url)
    peer.start()
    enqueue = int(os.environ.get("BENCH_APS_ENQUEUE", "0"))
    now = datetime.now(UTC)
    for n in range(enqueue):  # a memory store is filled by the worker itself
        peer.add_job(aps_sink_job, "date", run_date=now, args=[str(n)], id=str(n))
    print(json.dumps({"started": True}), flush=True)
    signal.sigwait({signal.SIGTERM})
    peer.shutdown(wait=False)


def aps_enqueue(url: str, count: int) -> None:
    """(d)'s producer for a persistent APScheduler store: N jobs due now, written straight to the
    store (a started scheduler, even paused, may run them as it shuts down)."""
    from apscheduler.job import Job
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.triggers.date import DateTrigger

    peer = _aps_scheduler(None)
    store = SQLAlchemyJobStore(url=url)
    store.start(peer, "default")
    now = datetime.now(UTC)
    try:
        for n in range(count):
            job = Job(
                peer,
                id=str(n),
                func=aps_sink_job,
                args=[str(n)],
                kwargs={},
                trigger=DateTrigger(now, timezone=UTC),
                executor="default",
                name="aps_sink_job",
                misfire_grace_time=None,
                coalesce=False,
                max_instances=1,
                next_run_time=now,
            )
            store.add_job(job)
    finally:
        store.shutdown()


# -- processes -------------------------------------------------------------------------------------


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A child in its own process group (so a kill reaches its pool processes too)."""
    return subprocess.Popen(
        args,
        env={**os.environ, **env},
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(30)


def stop_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(20)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        kill_group(process)


def group_rss(process: subprocess.Popen[bytes]) -> float:
    import psutil

    try:
        root = psutil.Process(process.pid)
        return float(
            root.memory_info().rss + sum(c.memory_info().rss for c in root.children(recursive=True))
        )
    except psutil.Error:
        return math.nan


def python_command(code: str) -> list[str]:
    return [sys.executable, "-c", code]
