"""The peer bench's harness: the Java driver's build cache, the kill workload's counting, and
the private servers it starts (PostgreSQL, Redis) and stops."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import pytest

from scheduler.bench import javadriver, peers, servers


def test_the_java_driver_is_not_rebuilt_when_its_source_hash_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(javadriver.CACHE_ENV, str(tmp_path))
    built = tmp_path / f"java-driver-{javadriver.source_hash()}"
    built.mkdir()
    (built / "peer-driver-1.jar").write_bytes(b"")
    monkeypatch.setattr(javadriver.shutil, "which", lambda tool: None)  # a build would fail

    assert javadriver.classpath().startswith(str(built / "peer-driver-1.jar"))


def test_a_missing_maven_makes_the_java_sides_unavailable_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(javadriver.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(javadriver.shutil, "which", lambda tool: None)

    with pytest.raises(javadriver.Unavailable, match="mvn is not on PATH: install Maven"):
        javadriver.classpath()


def test_the_kill_workload_counts_tasks_never_run_and_tasks_run_twice(tmp_path: Path) -> None:
    sink = tmp_path / "sink"

    def start(name: str) -> str:
        ids = range(10) if name == "first" else range(5, 20)  # the second redoes 5..9
        with open(f"{sink}.{name}", "a", encoding="ascii") as out:
            out.writelines(f"{n} {peers.now_ms()}\n" for n in ids)
        return name

    measured = peers.kill_test(
        count=30,
        sink=sink,
        enqueue=lambda: None,
        start_worker=start,
        kill=lambda worker: None,
        stop=lambda worker: None,
        timeout_s=0.2,
    )

    assert measured["ran_before_kill"] == 10
    assert measured["lost"] == 10 and measured["ran_twice"] == 5
    assert math.isnan(measured["recover_s"])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_the_private_postgresql_serves_a_bench_database_and_is_gone_afterwards(
    tmp_path: Path,
) -> None:
    import psycopg

    with servers.postgres(tmp_path) as pg:
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("select current_database()").fetchone() == ("bench",)
        assert pg.database_bytes() > 0
    assert not _listening(pg.port)
    assert not pg.directory.exists()


def test_the_private_redis_answers_on_its_own_port_and_stops_with_the_run(tmp_path: Path) -> None:
    with servers.redis_server(tmp_path) as redis:
        assert redis.used_memory() > 0
    assert not _listening(redis.port)
