"""A `docker compose` project of docker/ for the containers tests: up on free ports under a
name of its own, the host's CLI pointed at it, down leaving nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from scheduler.settings import ENV_PREFIX
from tests.http import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
WORKERS = ("worker-1", "worker-2")


def compose_command() -> list[str]:
    """`docker compose` where the plugin is installed, else Debian's `docker-compose`."""
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if plugin.returncode == 0:
        return ["docker", "compose"]
    standalone = shutil.which("docker-compose")
    assert standalone, "neither `docker compose` nor `docker-compose`: run scripts/containers.sh"
    return [standalone]


def wait_for(what: str, done: Any, timeout: float, logs: Any) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = done()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout:.0f} s; compose logs:\n{logs()}", pytrace=False)
        time.sleep(2)


def ran_on(rows: list[dict[str, Any]], cassandra_port: int, keyspace: str) -> set[str]:
    """The workers (client ids) whose attempts ran the listed tasks, from the store."""
    from scheduler.model import TaskKey
    from scheduler.stores.cassandra import CassandraTaskStore

    store = CassandraTaskStore(
        hosts=["127.0.0.1"], port=cassandra_port, keyspace=keyspace, consistency="ONE"
    )
    store.open(create_schema=False)
    try:
        return {
            attempt.worker
            for row in rows
            for attempt in store.attempts(
                row["partition"],
                TaskKey.from_ms(row["ordering_id"], row["scheduled_ms"], row["uniqueness_key"]),
            )
        }
    finally:
        store.close()


class Stack:
    """One `docker compose` project of docker/ (its files, free ports, a name of its own) and
    the host's CLI pointed at it."""

    def __init__(self, *files: str, names: dict[str, str] | None = None) -> None:
        self.ports = {
            name: str(free_port())
            for name in (
                "KAFKA_PORT",
                "KAFKA_CONTROLLER_PORT",
                "CASSANDRA_PORT",
                "CASSANDRA_STORAGE_PORT",
                "WORKER_1_METRICS_PORT",
                "WORKER_2_METRICS_PORT",
            )
        }
        self.project = f"scheduler-smoke-{uuid4().hex[:8]}"
        self.base = [*compose_command(), "-p", self.project]
        for file in files:
            self.base += ["-f", str(DOCKER / file)]
        # Stopping four JVMs on a loaded machine outlasts compose's default 60 s API timeout.
        self.env = {**os.environ, **self.ports, "COMPOSE_HTTP_TIMEOUT": "300"}
        self.cli_env = {
            **{k: v for k, v in os.environ.items() if not k.upper().startswith(ENV_PREFIX)},
            "SCHEDULER_LOG": "kafka",
            "SCHEDULER_STORE": "cassandra",
            "SCHEDULER_KAFKA_BOOTSTRAP": f"127.0.0.1:{self.ports['KAFKA_PORT']}",
            "SCHEDULER_CASSANDRA_HOSTS": "127.0.0.1",
            "SCHEDULER_CASSANDRA_PORT": self.ports["CASSANDRA_PORT"],
            "SCHEDULER_CASSANDRA_CONSISTENCY": "ONE",
            **(names or {}),
        }

    def compose(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.base, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        scheduler = str(Path(sys.executable).parent / "scheduler")
        return subprocess.run(
            [scheduler, *args], env=self.cli_env, input=stdin, capture_output=True, text=True
        )

    def logs(self) -> str:
        out = self.compose("logs", "--tail", "30", timeout=120)
        return out.stdout[-6000:] + out.stderr[-2000:]

    def up(self) -> None:
        subprocess.run(["bash", str(ROOT / "scripts" / "containers.sh")], check=True, stdout=-3)
        started = self.compose("up", "-d")
        assert started.returncode == 0, started.stderr[-3000:]

    def owners(self) -> set[str]:
        """The members owning the topic's partitions, as `scheduler group status` shows them
        (client ids with the consumer's suffix); empty while it cannot say."""
        status = self.cli("group", "status", "--json")
        if status.returncode != 0:
            return set()
        return {row.get("owner") for row in json.loads(status.stdout)} - {None, ""}

    def wait_for_two_owners(self, timeout: float = 300) -> None:
        wait_for(
            "two workers sharing the partitions",
            lambda: len(self.owners()) == 2,
            timeout,
            self.logs,
        )

    def container(self, service: str) -> str:
        """The id of `service`'s container."""
        found = self.compose("ps", "-q", service, timeout=60)
        assert found.returncode == 0 and found.stdout.strip(), found.stderr
        return found.stdout.strip()

    def down(self) -> None:
        down = self.compose("down", "-v", "--remove-orphans")
        if down.returncode != 0:  # e.g. the volume removed before a container let go of it
            down = self.compose("down", "-v", "--remove-orphans")
        assert down.returncode == 0, down.stderr
        left = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert left.stdout.strip() == "", "containers left behind by `down`"


def docker(*args: str, timeout: float = 120) -> str:
    """`docker ARGS`' output; fails the test, with its error, if it fails."""
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"docker {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()
