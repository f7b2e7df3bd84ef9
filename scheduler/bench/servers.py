"""Private servers for the peer schedulers: a PostgreSQL cluster and a Redis, each in a scratch
directory on a free loopback port, started and stopped by the bench (never a system server).

PostgreSQL refuses to run as root: when the bench runs as root, the cluster runs as the
`postgres` user (Debian's package creates it). A missing binary raises `Unavailable`, and the
sides that need the server are reported as skipped with that reason.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scheduler.bench.javadriver import Unavailable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def directory_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass(frozen=True)
class Postgres:
    port: int
    directory: Path

    @property
    def jdbc(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/bench?user=bench"

    @property
    def sqlalchemy_url(self) -> str:
        return f"postgresql+psycopg://bench@127.0.0.1:{self.port}/bench"

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} dbname=bench user=bench"

    def database_bytes(self) -> int:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("checkpoint")
            row = conn.execute("select pg_database_size('bench')").fetchone()
        return int(row[0]) if row else 0


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
            return str(candidate)
        raise Unavailable(f"{name} is not installed: apt-get install -y postgresql")
    return found


@contextmanager
def postgres(scratch: Path) -> Iterator[Postgres]:
    """A fresh PostgreSQL cluster with a `bench` database, trust auth on 127.0.0.1 only."""
    initdb, pg_ctl = _pg_tool("initdb"), _pg_tool("pg_ctl")
    # Its own directory under the system temp dir, not `scratch`: the `postgres` user must be
    # able to reach it, and the scratch directory's parents may be private to the bench's user.
    directory = Path(tempfile.mkdtemp(prefix="bench-postgres-"))
    user = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError as error:
            raise Unavailable("running as root and no `postgres` user to run PostgreSQL") from error
        user = "postgres"
        os.chown(directory, owner.pw_uid, owner.pw_gid)
    data = directory / "data"
    port = free_port()
    log = directory / "server.log"

    def run(*args: str) -> None:
        done = subprocess.run(args, user=user, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise Unavailable(f"{args[0]} failed: {(done.stdout + done.stderr)[-600:]}")

    run(initdb, "-D", str(data), "-U", "bench", "-A", "trust", "-E", "UTF8", "--no-sync")
    options = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={directory}"
    run(pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
    try:
        run(
            str(Path(initdb).resolve().with_name("createdb")),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "bench",
            "bench",
        )
        yield Postgres(port, data)
    finally:
        subprocess.run(
            [pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"],
            user=user,
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True)
class Redis:
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def used_memory(self) -> int:
        import redis

        client = redis.Redis(port=self.port)
        try:
            return int(client.info("memory")["used_memory"])
        finally:
            client.close()


@contextmanager
def redis_server(scratch: Path) -> Iterator[Redis]:
    """redis-server on a free loopback port, append-only file on (Celery's durable broker)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise Unavailable("redis-server is not installed: run scripts/bench-peers.sh")
    directory = scratch / f"redis-{os.getpid()}-{time.time_ns()}"
    directory.mkdir(parents=True)
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(directory),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--daemonize",
            "no",
        ],
        stdout=open(directory / "server.log", "wb"),  # noqa: SIM115 - the child owns it
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise Unavailable(f"redis-server did not start: see {directory}") from None
                time.sleep(0.05)
        yield Redis(port)
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(directory, ignore_errors=True)
