"""docker/: the compose file and the images, read and then run.

The first tests read the files and hold them to what the product accepts: a setting misspelt in
the compose file would otherwise only show when somebody's workers silently used a default. The
last one (marked `containers`, run by `scripts/test.sh --containers`) brings the whole file up
on the project's own images and runs tasks through two workers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import yaml

from scheduler.config import load_settings
from scheduler.health import Health, serve
from scheduler.settings import ENV_PREFIX, Settings, env_name
from tests.http import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
WORKERS = ("worker-1", "worker-2")
TAKEN = {9092, 9093, 9042, 7000, 8080, 8081, 9108}
"""Ports of the launcher's servers and the other tests, which compose must leave alone."""


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "docker-compose.yml").read_text())


def defaults(value: object) -> str:
    """`value` as compose reads it with no variables set: `${NAME:-default}` is `default`."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", str(value))


@pytest.mark.parametrize("worker", WORKERS)
def test_the_workers_settings_are_settings_and_load(compose, monkeypatch, worker):
    environment = compose["services"][worker]["environment"]
    known = {env_name(name) for name in Settings.model_fields}
    ours = {name for name in environment if name.startswith(ENV_PREFIX)}
    assert ours and ours <= known, f"not settings: {sorted(ours - known)}"
    for variable in list(os.environ):
        if variable.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(variable)
    for name, value in environment.items():
        monkeypatch.setenv(name, defaults(value))
    settings = load_settings()
    assert (settings.log, settings.store) == ("kafka", "cassandra")
    assert (settings.kafka_bootstrap, settings.cassandra_port) == ("127.0.0.1:29092", 29042)
    assert settings.client_id == worker


def test_every_service_is_on_the_host_network_off_the_ports_other_servers_use(compose):
    services = compose["services"]
    assert all(service["network_mode"] == "host" for service in services.values())
    assert not any("ports" in service for service in services.values())
    ports = [
        int(defaults(value))
        for service in services.values()
        for name, value in service.get("environment", {}).items()
        if name.endswith("_PORT")
    ]
    assert ports and not set(ports) & TAKEN
    metrics = [defaults(services[w]["environment"]["SCHEDULER_METRICS_PORT"]) for w in WORKERS]
    assert len(set(metrics)) == len(WORKERS), "workers on one network need a port each"


def test_the_images_are_the_projects_own(compose):
    services = compose["services"]
    assert defaults(services["kafka"]["image"]) == "scheduler-kafka:local"
    assert defaults(services["cassandra"]["image"]) == "scheduler-cassandra:local"
    for name in ("setup", *WORKERS):
        assert defaults(services[name]["image"]) == "scheduler-worker:local"


def test_workers_start_after_the_schema_and_the_topic_and_restart(compose):
    services = compose["services"]
    assert services["setup"]["depends_on"] == {
        "kafka": {"condition": "service_healthy"},
        "cassandra": {"condition": "service_healthy"},
    }
    for name in WORKERS:
        worker = services[name]
        assert worker["depends_on"] == {"setup": {"condition": "service_completed_successfully"}}
        assert worker["restart"] == "unless-stopped"
        assert worker["command"] == ["scheduler", "worker"]
    for server in ("kafka", "cassandra"):
        assert services[server]["healthcheck"]["test"]


def test_the_images_build_from_files_that_exist():
    dockerfile = (DOCKER / "Dockerfile").read_text()
    copied = [line.split()[1:-1] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    assert copied, "the Dockerfile copies nothing"
    for sources in copied:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
    assert 'CMD ["scheduler", "worker"]' in dockerfile
    for path in (DOCKER / "Dockerfile", DOCKER / "server.Dockerfile"):
        assert "ARG BASE=debian:bookworm-slim" in path.read_text(), path


@pytest.mark.parametrize("state", ["running", "stalled"])
def test_the_workers_healthcheck_fails_exactly_when_liveness_does(compose, state):
    """The compose healthcheck's command, run against a probe server on a free port: exit 0 for
    a live worker, non-zero for a stuck one (urlopen raises on the 503)."""
    kind, program, flag, code = compose["services"]["worker-1"]["healthcheck"]["test"]
    assert (kind, program, flag) == ("CMD", "python", "-c")
    health = Health(state=state, last_poll_s=0.1)
    server = serve(0, lambda: health, host="127.0.0.1")
    try:
        checked = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            timeout=30,
            env={**os.environ, "SCHEDULER_METRICS_PORT": str(server.server_port)},
        )
    finally:
        server.shutdown()
        server.server_close()
    assert (checked.returncode == 0) == health.live, checked.stderr


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


def ran_on(rows: list[dict[str, Any]], cassandra_port: int) -> set[str]:
    """The workers (client ids) whose attempts ran the listed tasks, from the store."""
    from scheduler.model import TaskKey
    from scheduler.stores.cassandra import CassandraTaskStore

    store = CassandraTaskStore(hosts=["127.0.0.1"], port=cassandra_port, consistency="ONE")
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


@pytest.mark.containers
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_compose_brings_up_two_workers_that_run_tasks_then_comes_down():
    """`up` on the project's images: Kafka, Cassandra, the schema and topic, two workers that
    share the partitions and both run command tasks enqueued from the host; `down` leaves
    nothing."""
    subprocess.run(["bash", str(ROOT / "scripts" / "containers.sh")], check=True, stdout=-3)
    ports = {
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
    project = f"scheduler-smoke-{uuid4().hex[:8]}"
    base = [*compose_command(), "-p", project, "-f", str(DOCKER / "docker-compose.yml")]
    compose_env = {**os.environ, **ports}
    cli_env = {
        **{k: v for k, v in os.environ.items() if not k.upper().startswith(ENV_PREFIX)},
        "SCHEDULER_LOG": "kafka",
        "SCHEDULER_STORE": "cassandra",
        "SCHEDULER_KAFKA_BOOTSTRAP": f"127.0.0.1:{ports['KAFKA_PORT']}",
        "SCHEDULER_CASSANDRA_HOSTS": "127.0.0.1",
        "SCHEDULER_CASSANDRA_PORT": ports["CASSANDRA_PORT"],
        "SCHEDULER_CASSANDRA_CONSISTENCY": "ONE",
    }
    scheduler = str(Path(sys.executable).parent / "scheduler")

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [scheduler, *args], env=cli_env, input=stdin, capture_output=True, text=True
        )

    def logs() -> str:
        out = subprocess.run([*base, "logs", "--tail", "30"], capture_output=True, text=True)
        return out.stdout[-6000:] + out.stderr[-2000:]

    try:
        subprocess.run([*base, "up", "-d"], env=compose_env, check=True, capture_output=True)

        def owners() -> set[str]:
            status = cli("group", "status", "--json")
            if status.returncode != 0:
                return set()
            found = {row.get("owner") for row in json.loads(status.stdout)}
            return found if len(found - {None, ""}) == 2 else set()

        wait_for("two workers sharing the partitions", owners, 300, logs)
        tasks = [
            {
                "ordering_id": f"smoke-{index}",
                "data": {"executor": "command", "argv": ["sh", "-c", f"test {index} -ge 0"]},
            }
            for index in range(20)
        ]
        sent = cli("enqueue-many", "-", stdin="\n".join(json.dumps(t) for t in tasks))
        assert sent.returncode == 0, sent.stderr

        def finished() -> list[dict[str, Any]]:
            listed = cli("tasks", "list", "--json", "--limit", "1000")
            rows = json.loads(listed.stdout) if listed.returncode == 0 else []
            troubled = [row for row in rows if row["state"] in ("failed", "retrying")]
            assert not troubled, f"tasks that failed in compose: {troubled[:3]}\n{logs()}"
            done = [row for row in rows if row["state"] == "succeeded"]
            return done if len(done) == len(tasks) else []

        rows = wait_for(f"{len(tasks)} succeeded tasks", finished, 120, logs)
        assert ran_on(rows, int(ports["CASSANDRA_PORT"])) == set(WORKERS)
    finally:
        down = subprocess.run(
            [*base, "down", "-v", "--remove-orphans"], env=compose_env, capture_output=True
        )
    assert down.returncode == 0, down.stderr
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert left.stdout.strip() == "", "containers left behind by `down`"
