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
import subprocess
import sys
from typing import Any

import pytest
import yaml

from scheduler.config import load_settings
from scheduler.health import Health, serve
from scheduler.settings import ENV_PREFIX, Settings, env_name
from tests.services.compose_stack import DOCKER, ROOT, WORKERS, Stack, ran_on

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
        # A failed start is tried again, a kill (the fault tests') is left alone.
        assert services[server]["restart"] == "on-failure"


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


def example_names() -> dict[str, str]:
    """The example's topic, group and keyspace (the defaults, suffixed), as variables."""
    from scheduler.examples.clicks.run import example_settings

    own = example_settings(Settings())
    return {
        env_name(name): str(getattr(own, name))
        for name in ("topic", "group_id", "cassandra_keyspace")
    }


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "example.yml").read_text())


def test_the_examples_workers_use_the_examples_names_programs_and_data(compose, example):
    """The override puts setup and both workers in the names `scheduler example run` derives,
    with the programs file that setup writes on the volume the example's data lives on."""
    services = example["services"]
    names = example_names()
    programs = "/home/scheduler/.scheduler/example/programs.json"
    mounts = ["example:/home/scheduler/.scheduler/example"]
    for name in ("setup", *WORKERS):
        environment = services[name]["environment"]
        assert {k: environment[k] for k in names} == names, name
        assert environment["SCHEDULER_PROGRAMS_FILE"] == programs
        assert services[name]["volumes"] == mounts
        assert name in compose["services"], f"{name} overrides no service of the compose file"
    known = {env_name(name) for name in Settings.model_fields}
    for name, service in services.items():
        ours = {v for v in service.get("environment", {}) if v.startswith(ENV_PREFIX)}
        assert ours <= known, f"{name}: not settings: {sorted(ours - known)}"
    assert "scheduler example programs" in " ".join(services["setup"]["command"])
    runner = services["example"]
    assert runner["command"] == ["scheduler", "example", "run", "--fleet"]
    assert runner["volumes"] == mounts and runner["profiles"] == ["example"]
    assert not set(names) & set(runner["environment"]), "it suffixes the names itself"
    base = compose["services"]["worker-1"]["environment"]
    for variable, value in runner["environment"].items():
        assert defaults(value) == defaults(base[variable]), variable
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "RUN mkdir -p .scheduler/example" in dockerfile, "the volume would be root's"


@pytest.mark.containers
@pytest.mark.slow
@pytest.mark.timeout(2400)  # up and the pipeline: docs/containers.md, "Cost"
def test_compose_runs_the_example_pipeline_on_two_workers_then_comes_down():
    """`up` on the project's images: Kafka, Cassandra, the schema, topic and programs, two
    workers in the example's group; `run example` runs the README's pipeline (PySpark jobs,
    schedules, events) on them and prints its summary; both workers ran its runs; `down`
    leaves nothing."""
    from tests.executors.test_clicks_example import assert_fired_as_scheduled

    names = example_names()
    stack = Stack("docker-compose.yml", "example.yml", names=names)
    try:
        stack.up()
        stack.wait_for_two_owners()
        ran = stack.compose("run", "--rm", "example", timeout=1800)
        out = ran.stdout
        assert ran.returncode == 0, f"{out[-4000:]}\n{ran.stderr[-3000:]}\n{stack.logs()}"
        assert "The workers of group 'scheduler-workers-example' run the tasks" in out
        assert_fired_as_scheduled(out, events_read=24 * 5000)
        assert re.search(r"daily \d{8}: [\d,]+ of 120,000 events kept", out), out

        listed = stack.cli("tasks", "list", "--json", "--limit", "1000")
        assert listed.returncode == 0, listed.stderr
        runs = [row for row in json.loads(listed.stdout) if row["ordering_id"].startswith("run:")]
        assert len(runs) >= 26, runs  # 24 hourly runs, the rollup and the report
        assert {row["state"] for row in runs} == {"succeeded"}
        keyspace = names["SCHEDULER_CASSANDRA_KEYSPACE"]
        assert ran_on(runs, int(stack.ports["CASSANDRA_PORT"]), keyspace) == set(WORKERS)
    finally:
        stack.down()
