"""peer: this scheduler side by side with the durable schedulers people would pick instead.

Each side is started, loaded, measured and stopped by the bench, on private servers it starts
itself (`scheduler.bench.servers`: PostgreSQL and Redis on free loopback ports); a side whose
server or toolchain cannot be installed is reported as skipped with the reason, never dropped.

Sides (`--peers` picks groups: apscheduler, celery, db-scheduler, quartz, scheduler):

* db-scheduler 15 on PostgreSQL, with its defaults (fetch-and-lock-on-execute, 10 threads,
  10 s polling) and with its README's benchmark settings (lock-and-fetch 4.0/20.0, 20 threads);
* Quartz 2.3 with the JDBC job store (JobStoreTX) on PostgreSQL, clustered, 10 threads;
* Celery 5 `eta` tasks on Redis, a `celery worker` with its defaults (prefork, one per core);
* APScheduler 3 BackgroundScheduler on its memory store, SQLite and PostgreSQL (SQLAlchemy);
* this scheduler: a `scheduler worker` on the embedded backends, and on Kafka + Cassandra
  (with `--backends ...,kafka-cassandra`).

Workloads, the same for all (`scheduler.bench.peers`): (a) N tasks due at once, the rate from
the first enqueue to the last start (enqueue included, as `execute` measures it); (b) a steady
rate at 25/50/90 % of the side's own (a) rate, every task due 1 s after it is sent: firing lag
p50/p99; (c) `--backlog` tasks due over the next day (from 1 h on), nothing due: enqueue rate,
storage and memory growth; (d) tasks due now with 20 ms of work each, the worker SIGKILLed a
third of the way through and a replacement started at once: tasks lost (not run within the wait),
run twice, and the time from the kill until every task had run.
"""

from __future__ import annotations

import functools
import json
import math
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from scheduler.bench import peers
from scheduler.bench.common import (
    DISTRIBUTED,
    EMBEDDED,
    BenchOptions,
    ScenarioResult,
    machine,
    now_ms,
)
from scheduler.bench.javadriver import Unavailable
from scheduler.bench.servers import Postgres, Redis, directory_size, postgres, redis_server

GROUPS = ("scheduler", "apscheduler", "celery", "db-scheduler", "quartz")
OURS = "scheduler embedded"
WORK_MS = 20
CELERY_CAVEAT = (
    "Celery: an eta task waits unacknowledged in the worker's memory until due; Redis redelivers "
    "it after the visibility timeout (1 h by default), so an eta beyond it runs twice unless "
    "visibility_timeout is raised, and a dead worker's eta tasks return only after it"
)


@dataclass(frozen=True)
class Sizes:
    burst: int
    levels: tuple[float, ...]
    steady_s: float
    drain_s: float
    backlog: int
    kill: int
    kill_wait_s: float

    @classmethod
    def of(cls, options: BenchOptions) -> Sizes:
        burst = options.pick(1_000, 60)
        if options.smoke:
            # The kill's wait, which every side that loses tasks waits out: 10 s still holds
            # each replacement's start and first fetch (resumed 2 s after the kill at most);
            # this scheduler's replacement had run every task within 1 s.
            return cls(burst, (0.5,), 1.5, 11.0, options.backlog or 200, 30, 10.0)
        return cls(burst, (0.25, 0.5, 0.9), 10.0, 40.0, options.backlog or 5_000, 300, 30.0)


@dataclass
class Servers:
    """The private servers, started on first use and stopped with the run."""

    stack: ExitStack
    scratch: Path
    _pg: Postgres | None = None
    _redis: Redis | None = None

    def pg(self) -> Postgres:
        if self._pg is None:
            self._pg = self.stack.enter_context(postgres(self.scratch))
        return self._pg

    def redis(self) -> Redis:
        if self._redis is None:
            self._redis = self.stack.enter_context(redis_server(self.scratch))
        return self._redis

    def pg_reset(self) -> None:
        import psycopg

        with psycopg.connect(self.pg().dsn, autocommit=True) as conn:
            conn.execute("drop schema public cascade")
            conn.execute("create schema public")


# -- the Java sides --------------------------------------------------------------------------------


def java_side(system: str, servers: Servers, sizes: Sizes, scratch: Path) -> dict[str, Any]:
    from scheduler.bench.javadriver import command

    pg = servers.pg()
    servers.pg_reset()
    storage_before = pg.database_bytes()
    done = subprocess.run(
        command(
            system,
            "suite",
            jdbc=pg.jdbc,
            burst=sizes.burst,
            burst_timeout_s=max(60, sizes.burst / 50),
            levels=",".join(map(str, sizes.levels)),
            steady_s=sizes.steady_s,
            drain_s=sizes.drain_s,
            backlog=sizes.backlog,
        ),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{system} driver failed: {done.stderr[-1500:]}")
    measured: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    measured["backlog"]["storage_mb"] = (pg.database_bytes() - storage_before) / 2**20
    measured["kill"] = java_kill(system, servers, sizes, scratch)
    return measured


def java_kill(system: str, servers: Servers, sizes: Sizes, scratch: Path) -> dict[str, float]:
    from scheduler.bench.javadriver import command

    pg = servers.pg()
    sink = scratch / f"{system}-kill-{time.time_ns()}" / "sink"
    sink.parent.mkdir(parents=True)

    def enqueue() -> None:
        subprocess.run(
            command(system, "enqueue", jdbc=pg.jdbc, n=sizes.kill), check=True, capture_output=True
        )

    def start(name: str) -> Any:
        args = command(system, "worker", jdbc=pg.jdbc, sink=f"{sink}.{name}", work_ms=WORK_MS)
        return peers.spawn(args, {}, sink.parent / f"{name}.log")

    return peers.kill_test(
        count=sizes.kill,
        sink=sink,
        enqueue=enqueue,
        start_worker=start,
        kill=peers.kill_group,
        stop=peers.stop_group,
        timeout_s=sizes.kill_wait_s,
    )


# -- Celery ----------------------------------------------------------------------------------------


def _celery_worker(redis: Redis, env: dict[str, str], log: Path, name: str) -> Any:
    command = peers.python_command(
        "from scheduler.bench.celery_peer import app; "
        f"app.worker_main(['worker', '--loglevel', 'WARNING', '-n', '{name}@%h'])"
    )
    return peers.spawn(command, {"BENCH_CELERY_BROKER": redis.url, **env}, log)


@contextmanager
def celery_harness(redis: Redis, scratch: Path) -> Iterator[peers.Harness]:
    from datetime import UTC, datetime

    from scheduler.bench import celery_peer

    celery_peer.app.conf.broker_url = redis.url
    directory = scratch / f"celery-{time.time_ns()}"
    directory.mkdir()
    sink = directory / "records"
    worker = _celery_worker(redis, {"BENCH_CELERY_SINK": str(sink)}, directory / "w.log", "a")

    def records() -> list[tuple[int, int]]:
        out = []
        for path in sorted(directory.glob("records.*")):
            for line in path.read_text(encoding="ascii").splitlines():
                _, due, start = line.split()
                out.append((int(due), int(start)))
        out.sort(key=lambda r: r[1])
        return out

    def send(n: int, due_ms: int) -> None:
        celery_peer.noop.apply_async((n, due_ms), eta=datetime.fromtimestamp(due_ms / 1000, UTC))

    harness = peers.Harness(
        send=send,
        records=records,
        count=lambda: len(records()),
        storage_bytes=lambda: float(redis.used_memory()),
        memory_bytes=lambda: peers.group_rss(worker),
    )
    try:
        send(-1, now_ms())  # warm: wait until the worker runs a task
        deadline = time.monotonic() + 60
        while harness.count() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        if harness.count() < 1:
            raise RuntimeError(f"the celery worker ran nothing in 60 s: see {directory}/w.log")
        yield harness
    finally:
        peers.stop_group(worker)


def celery_side(servers: Servers, sizes: Sizes, scratch: Path) -> dict[str, Any]:
    redis = servers.redis()
    with celery_harness(redis, scratch) as harness:
        measured = peers.suite(
            harness,
            burst_n=sizes.burst,
            levels=sizes.levels,
            steady_s=sizes.steady_s,
            drain_s=sizes.drain_s,
            backlog_n=sizes.backlog,
        )
    redis_flush(redis)
    measured["kill"] = celery_kill(redis, sizes, scratch)
    return measured


def redis_flush(redis: Redis) -> None:
    import redis as client

    connection = client.Redis(port=redis.port)
    connection.flushall()
    connection.close()


def celery_kill(redis: Redis, sizes: Sizes, scratch: Path) -> dict[str, float]:
    from datetime import UTC, datetime

    from scheduler.bench import celery_peer

    celery_peer.app.conf.broker_url = redis.url
    directory = scratch / f"celery-kill-{time.time_ns()}"
    directory.mkdir()
    sink = directory / "sink"
    env = {peers.SINK_ENV: str(sink), peers.WORK_ENV: str(WORK_MS)}

    def enqueue() -> None:
        now = datetime.now(UTC)
        for n in range(sizes.kill):
            celery_peer.sink.apply_async((str(n),), eta=now)

    return peers.kill_test(
        count=sizes.kill,
        sink=sink,
        enqueue=enqueue,
        start_worker=lambda name: _celery_worker(redis, env, directory / f"{name}.log", name),
        kill=peers.kill_group,
        stop=peers.stop_group,
        timeout_s=sizes.kill_wait_s,
    )


# -- APScheduler -----------------------------------------------------------------------------------


def apscheduler_side(store: str, servers: Servers, sizes: Sizes, scratch: Path) -> dict[str, Any]:
    directory = scratch / f"aps-{store}-{time.time_ns()}"
    directory.mkdir()
    url: str | None = None
    storage: Callable[[], float] | None = None
    if store == "sqlite":
        path = directory / "jobs.sqlite"
        url = f"sqlite:///{path}"
        storage = lambda: float(path.stat().st_size) if path.exists() else 0.0  # noqa: E731
    elif store == "postgresql":
        servers.pg_reset()
        pg = servers.pg()
        url = pg.sqlalchemy_url
        storage = lambda: float(pg.database_bytes())  # noqa: E731
    with peers.apscheduler(url, storage) as harness:
        measured = peers.suite(
            harness,
            burst_n=sizes.burst,
            levels=sizes.levels,
            steady_s=sizes.steady_s,
            drain_s=sizes.drain_s,
            backlog_n=sizes.backlog,
        )
    if store == "sqlite":
        (directory / "jobs.sqlite").unlink()
        url = f"sqlite:///{directory / 'kill.sqlite'}"
    elif store == "postgresql":
        servers.pg_reset()
    measured["kill"] = apscheduler_kill(url, sizes, directory)
    return measured


def apscheduler_kill(url: str | None, sizes: Sizes, directory: Path) -> dict[str, float]:
    sink = directory / "sink"
    env = {peers.SINK_ENV: str(sink), peers.WORK_ENV: str(WORK_MS), "BENCH_APS_URL": url or ""}

    def enqueue() -> None:
        if url is not None:
            peers.aps_enqueue(url, sizes.kill)

    def start(name: str) -> Any:
        filled = {"BENCH_APS_ENQUEUE": str(sizes.kill)} if url is None and name == "first" else {}
        code = "from scheduler.bench.peers import apscheduler_worker; apscheduler_worker()"
        return peers.spawn(peers.python_command(code), {**env, **filled}, directory / f"{name}.log")

    return peers.kill_test(
        count=sizes.kill,
        sink=sink,
        enqueue=enqueue,
        start_worker=start,
        kill=peers.kill_group,
        stop=peers.stop_group,
        timeout_s=sizes.kill_wait_s,
    )


# -- this scheduler --------------------------------------------------------------------------------


def scheduler_side(kind: str, options: BenchOptions, sizes: Sizes) -> dict[str, Any]:
    from scheduler.bench.enqueue import make_tasks
    from scheduler.bench.probe import probe_count, read_probe
    from scheduler.bench.workers import backend
    from scheduler.client import SchedulerClient
    from scheduler.model import Task, from_epoch_ms

    with backend(kind, options, "peer") as run:
        worker = run.start_worker("worker0")
        run.wait_assigned()
        client = SchedulerClient(log=run.log)
        data = run.directory / "data"
        try:

            def send(n: int, due_ms: int) -> None:
                client.schedule_task(Task(f"p-{n % 97:02d}", from_epoch_ms(due_ms), f"{n:09d}"))

            def send_burst(first: int, count: int, due_ms: int) -> None:
                client.schedule_tasks(make_tasks(count, due_ms=due_ms, prefix=f"b{first}"))

            harness = peers.Harness(
                send=send,
                send_burst=send_burst,
                records=lambda: read_probe(run.probe),
                count=lambda: probe_count(run.probe),
                flush=lambda: client.flush(300),
                storage_bytes=(lambda: float(directory_size(data))) if kind == EMBEDDED else None,
                memory_bytes=lambda: peers.group_rss(worker.process),
            )
            measured = peers.suite(
                harness,
                burst_n=sizes.burst,
                levels=sizes.levels,
                steady_s=sizes.steady_s,
                drain_s=sizes.drain_s,
                backlog_n=sizes.backlog,
            )
        finally:
            client.close()
    measured["kill"] = scheduler_kill(kind, options, sizes)
    return measured


def scheduler_kill(kind: str, options: BenchOptions, sizes: Sizes) -> dict[str, float]:
    from scheduler.bench.enqueue import make_tasks
    from scheduler.bench.workers import backend
    from scheduler.client import SchedulerClient

    with backend(kind, options, "peerkill", executor="scheduler.bench.peers:sink_executor") as run:
        sink = run.directory / "sink"
        env = {peers.SINK_ENV: str(sink), peers.WORK_ENV: str(WORK_MS)}

        def enqueue() -> None:
            client = SchedulerClient(log=run.log)
            try:
                tasks = make_tasks(sizes.kill, due_ms=now_ms(), prefix="k")
                client.schedule_tasks(tasks).result(120)
            finally:
                client.close()

        return peers.kill_test(
            count=sizes.kill,
            sink=sink,
            enqueue=enqueue,
            start_worker=lambda name: run.start_worker(name, twin=False, **env),
            kill=lambda worker: worker.kill(),
            stop=lambda worker: worker.stop(30),
            timeout_s=sizes.kill_wait_s,
        )


# -- the table -------------------------------------------------------------------------------------


def sides(
    options: BenchOptions, servers: Servers, sizes: Sizes
) -> dict[str, tuple[str, Callable[[], dict[str, Any]]]]:
    scratch = options.scratch
    found: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
        OURS: ("scheduler", lambda: scheduler_side(EMBEDDED, options, sizes)),
    }
    if options.wants(DISTRIBUTED):
        found["scheduler Kafka+Cassandra"] = (
            "scheduler",
            lambda: scheduler_side(DISTRIBUTED, options, sizes),
        )
    for label, store in (("memory", "memory"), ("SQLite", "sqlite"), ("PostgreSQL", "postgresql")):
        found[f"APScheduler 3 {label}"] = (
            "apscheduler",
            functools.partial(apscheduler_side, store, servers, sizes, scratch),
        )
    found["Celery eta on Redis"] = ("celery", lambda: celery_side(servers, sizes, scratch))
    found["db-scheduler defaults"] = (
        "db-scheduler",
        lambda: java_side("dbscheduler", servers, sizes, scratch),
    )
    found["db-scheduler tuned"] = (
        "db-scheduler",
        lambda: java_side("dbscheduler-tuned", servers, sizes, scratch),
    )
    found["Quartz JDBC clustered"] = (
        "quartz",
        lambda: java_side("quartz", servers, sizes, scratch),
    )
    return found


def _ratio(value: float, ours: float) -> float:
    if not ours or math.isnan(ours) or value is None or math.isnan(value):
        return math.nan
    return value / ours


def run(options: BenchOptions) -> ScenarioResult:
    sizes = Sizes.of(options)
    result = ScenarioResult(
        "peer",
        details={"sizes": sizes.__dict__, "work_ms_in_kill": WORK_MS, "machine": machine()},
    )
    wanted = set(options.peers or GROUPS)
    measured: dict[str, dict[str, Any]] = {}
    with ExitStack() as stack:
        servers = Servers(stack, options.scratch)
        for name, (group, side) in sides(options, servers, sizes).items():
            if group not in wanted:
                continue
            started = time.monotonic()
            try:
                measured[name] = side()
                measured[name]["wall_s"] = round(time.monotonic() - started, 1)
                click.echo(f"   {name}: measured in {measured[name]['wall_s']:g} s")
            except Unavailable as error:
                result.notes.append(f"{name} skipped: {error}")
            except Exception as error:  # the other sides' numbers are still worth having
                result.notes.append(f"{name} failed: {type(error).__name__}: {str(error)[:400]}")
    result.details["measured"] = measured
    ours = measured.get(OURS)
    for name, values in measured.items():
        row: dict[str, Any] = {"side": name, "a_tasks_per_s": values["burst"]["ran_per_s"]}
        for level, lag in zip(sizes.levels, values["steady"], strict=True):
            pct = int(level * 100)
            row[f"b{pct}_p50_ms"] = lag["p50_ms"]
            row[f"b{pct}_p99_ms"] = lag["p99_ms"]
        back = values["backlog"]
        kill = values["kill"]
        row |= {
            "c_enqueue_per_s": back["enqueue_per_s"],
            "c_storage_mb": back["storage_mb"],
            "c_memory_mb": back["memory_mb"],
            "d_lost": kill["lost"],
            "d_twice": kill["ran_twice"],
            "d_recover_s": kill["recover_s"],
        }
        if ours is not None:
            row["a_x_ours"] = _ratio(row["a_tasks_per_s"], ours["burst"]["ran_per_s"])
            row["c_x_ours"] = _ratio(back["enqueue_per_s"], ours["backlog"]["enqueue_per_s"])
        result.add(**row)
    top = int(sizes.levels[-1] * 100)
    result.notes += [
        f"(a) {sizes.burst:,} tasks due at once, enqueue included; (b) {sizes.steady_s:g} s at "
        f"{', '.join(f'{int(v * 100)}%' for v in sizes.levels)} of the side's own (a) rate, due "
        f"1 s after sending: lag in ms (b{top}: at {top}%); (c) {sizes.backlog:,} tasks due over "
        "the next day; (d) "
        f"{sizes.kill} tasks of {WORK_MS} ms, worker SIGKILLed at a third, replacement started: "
        f"lost = not run within {sizes.kill_wait_s:g} s, recover_s = kill to all run (n/a: never)",
        "x_ours: the side's rate over this scheduler's embedded rate in this run",
        "storage: PostgreSQL database / SQLite file / Redis used_memory / embedded data dir "
        "growth (n/a: Cassandra and Kafka keep theirs on their servers); memory: growth of the "
        "process holding the scheduler (worker RSS; JVM live heap; the bench process for "
        "APScheduler, whose scheduler runs in it)",
        CELERY_CAVEAT,
    ]
    return result
