"""Bring the local Kafka and Cassandra servers up, report on them, and take them down.

Every operation is idempotent and safe to run from several processes at once (a file lock per
server serialises them): `start` on a healthy server does nothing, a stale pid file is removed,
and a server that is already answering on its port but was not started from this state dir
(another checkout, a hand-started one) is reused rather than fought over.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scheduler.services import cluster
from scheduler.services.base import Server, ServerPaths
from scheduler.services.cassandra import Cassandra, SecuredCassandra
from scheduler.services.errors import ServiceError
from scheduler.services.kafka import Kafka, SecuredKafka
from scheduler.services.maven import resolve
from scheduler.services.process import (
    log_tail,
    port_open,
    require_java17,
    running_pid,
    spawn,
    terminate,
)

SERVERS: tuple[str, ...] = ("kafka", "cassandra")
"""What `up` starts by default: the servers the product's tests and local runs talk to."""
SECURED_CASSANDRA = "cassandra-secured"
SECURED_KAFKA = "kafka-secured"
SECURED = (SECURED_KAFKA, SECURED_CASSANDRA)
"""Servers `up` starts only when asked: for tests and trials of the security settings."""
SECURED_FLAGS = {SECURED_KAFKA: "secured-kafka", SECURED_CASSANDRA: "secured-cassandra"}
"""The `scheduler services up` option that starts each."""
ALL_SERVERS = (*SERVERS, *SECURED, *cluster.NAMES)


@dataclass(frozen=True)
class ServerStatus:
    """What `status` knows about one server."""

    name: str
    """``kafka`` or ``cassandra``."""
    pid: int | None
    """The pid from our pid file, or None when we did not start it (or it is not running)."""
    address: str
    """``host:port`` clients connect to."""
    healthy: bool
    """True when a real protocol request succeeded just now."""
    detail: str
    """Why it is not healthy, or ``external`` when healthy but started by someone else."""


def state_dir() -> Path:
    """``$SCHEDULER_SERVICES_DIR``, else ``.services/`` in the source checkout, else in cwd."""
    env = os.environ.get("SCHEDULER_SERVICES_DIR")
    if env:
        return Path(env).expanduser().resolve()
    checkout = Path(__file__).resolve().parents[2]
    base = checkout if (checkout / "pyproject.toml").is_file() else Path.cwd()
    return base / ".services"


def server(name: str) -> Server:
    member = cluster.server(name)
    if member is not None:
        return member
    if name == "kafka":
        return Kafka()
    if name == "cassandra":
        return Cassandra()
    if name == SECURED_CASSANDRA:
        return SecuredCassandra(state_dir() / SECURED_CASSANDRA / "tls")
    if name == SECURED_KAFKA:
        return SecuredKafka(state_dir() / SECURED_KAFKA / "tls")
    raise ServiceError(f"unknown server {name!r}: choose one of {', '.join(ALL_SERVERS)}")


def _paths(srv: Server) -> ServerPaths:
    root = state_dir()
    return ServerPaths(root=root / srv.name, cache=root / "cache")


@contextmanager
def _locked(paths: ServerPaths) -> Iterator[None]:
    """Serialise start/stop of one server across processes (parallel test sessions)."""
    paths.root.mkdir(parents=True, exist_ok=True)
    with open(paths.lock_file, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _health(srv: Server, timeout: float = 5.0) -> str | None:
    """None when healthy, else the reason."""
    if not port_open(srv.host, srv.port):
        return f"nothing listening on {srv.address}"
    try:
        srv.check(timeout)
    except ServiceError as exc:
        return str(exc)
    return None


def status(name: str) -> ServerStatus:
    srv = server(name)
    paths = _paths(srv)
    pid = running_pid(paths.pid_file, srv.main_class)
    problem = _health(srv)
    if problem is None:
        detail = "" if pid is not None else "external (not started from this state dir)"
    elif pid is not None:
        detail = f"pid {pid} running but {problem}"
    elif not port_open(srv.host, srv.port):
        detail = f"{problem}; `scheduler services up {name}` starts it"
    else:
        detail = problem
    return ServerStatus(name, pid, srv.address, problem is None, detail)


def start(name: str) -> ServerStatus:
    """Start ``name`` unless it is already healthy; wait until it answers; return its status."""
    srv = server(name)
    paths = _paths(srv)
    with _locked(paths):
        pid = _launch(srv, paths)
        if pid is not None:
            _wait_ready(srv, paths, pid)
    return status(name)


def start_all(names: tuple[str, ...]) -> list[ServerStatus]:
    """Start every server of ``names`` at once, then wait for each: the brokers of a KRaft
    quorum, none of which answers before a majority of the controllers runs."""
    launched: list[tuple[Server, ServerPaths, int]] = []
    for name in names:
        srv = server(name)
        paths = _paths(srv)
        with _locked(paths):
            pid = _launch(srv, paths)
        if pid is not None:
            launched.append((srv, paths, pid))
    for srv, paths, pid in launched:
        _wait_ready(srv, paths, pid)
    return [status(name) for name in names]


def _launch(srv: Server, paths: ServerPaths) -> int | None:
    """Spawn ``srv`` unless it runs; its pid, or None when someone else's server answers."""
    name = srv.name
    pid = running_pid(paths.pid_file, srv.main_class)
    if pid is not None:
        return pid
    if _health(srv) is None:
        return None  # someone else's server answers: reuse it
    busy = [p for p in srv.ports if port_open(srv.host, p)]
    if busy:
        variable = f"SCHEDULER_SERVICES_{name.upper().replace('-', '_')}_PORT"
        raise ServiceError(
            f"cannot start {name}: port(s) {busy} on {srv.host} are taken by a process this "
            f"launcher did not start (state dir {paths.root.parent}). Stop it, or move "
            f"the server with {variable}, or point clients at it"
            " with SCHEDULER_KAFKA_BOOTSTRAP / SCHEDULER_CASSANDRA_HOSTS."
        )
    java = require_java17()
    jars = resolve(srv.distribution, srv.artifacts(), paths.cache)
    paths.make()
    (paths.root / "tmp").mkdir(exist_ok=True)
    srv.configure(java, paths, jars)
    pid = spawn(
        srv.argv(java, paths, jars),
        cwd=paths.root,
        log_file=paths.log_file,
        pid_file=paths.pid_file,
    )
    return pid


def _wait_ready(srv: Server, paths: ServerPaths, pid: int) -> None:
    deadline = time.monotonic() + srv.startup_timeout
    problem: str | None = "not checked yet"
    while time.monotonic() < deadline:
        if running_pid(paths.pid_file, srv.main_class) is None:
            raise ServiceError(
                f"{srv.name} (pid {pid}) exited during startup. Last lines of "
                f"{paths.log_file}:\n{log_tail(paths.log_file)}"
            )
        problem = _health(srv, timeout=3.0)
        if problem is None:
            return
        time.sleep(0.5)
    raise ServiceError(
        f"{srv.name} (pid {pid}) did not become healthy within {srv.startup_timeout:.0f} s "
        f"({problem}). It is left running; `scheduler services down` stops it. Last lines of "
        f"{paths.log_file}:\n{log_tail(paths.log_file)}"
    )


def stop(name: str) -> bool:
    """Stop ``name`` if this launcher started it; True when a process was stopped."""
    srv = server(name)
    paths = _paths(srv)
    with _locked(paths):
        pid = running_pid(paths.pid_file, srv.main_class)
        if pid is None:
            return False
        terminate(pid, srv.main_class, grace=60.0 if srv.distribution == "cassandra" else 30.0)
        paths.pid_file.unlink(missing_ok=True)
        return True


def restart(name: str, down_s: float = 0.0) -> ServerStatus:
    """Stop and start ``name`` keeping its data dir, after ``down_s`` seconds stopped (an outage
    rather than a restart): for tests of server restarts."""
    srv = server(name)
    if running_pid(_paths(srv).pid_file, srv.main_class) is None and _health(srv) is None:
        raise ServiceError(
            f"cannot restart {name} at {srv.address}: it was not started from this state dir "
            f"({state_dir()}), so this launcher has no process to restart"
        )
    stop(name)
    time.sleep(down_s)
    return start(name)


def up(names: tuple[str, ...] = SERVERS) -> list[ServerStatus]:
    """Start every named server (one after the other: two cores cannot start both faster)."""
    return [start(name) for name in names]


def down(names: tuple[str, ...] = SERVERS) -> list[str]:
    """Stop every named server this launcher started; return the names actually stopped."""
    return [name for name in names if stop(name)]


def up_cluster(names: tuple[str, ...] = cluster.NAMES) -> list[ServerStatus]:
    """Start the replicated cluster's servers among ``names`` (`scheduler.services.cluster`):
    its brokers together (a KRaft quorum answers only once a majority runs) with Cassandra's
    seed, then the other Cassandra nodes together (they join through the seed)."""
    seed, *others = cluster.CASSANDRA_NAMES
    first = tuple(name for name in (*cluster.KAFKA_NAMES, seed) if name in names)
    rest = tuple(name for name in others if name in names)
    return (start_all(first) if first else []) + (start_all(rest) if rest else [])


def pid(name: str) -> int | None:
    """The pid of ``name`` when this launcher started it and it runs (for fault tests)."""
    srv = server(name)
    return running_pid(_paths(srv).pid_file, srv.main_class)
