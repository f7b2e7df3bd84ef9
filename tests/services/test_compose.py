"""docker/: the compose file and the worker image, checked without a Docker engine.

This machine has no engine to run `docker compose up`, so these read the files and hold them to
what the product accepts: a setting misspelt in the compose file would otherwise only show when
somebody's workers silently used a default (a warning in their logs at best).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config import load_settings
from scheduler.health import Health, serve
from scheduler.services.cassandra import CASSANDRA_VERSION
from scheduler.services.kafka import KAFKA_VERSION
from scheduler.settings import ENV_PREFIX, Settings, env_name

DOCKER = Path(__file__).resolve().parents[2] / "docker"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "docker-compose.yml").read_text())


def test_the_workers_settings_are_settings_and_load(compose, monkeypatch):
    environment = compose["services"]["worker"]["environment"]
    known = {env_name(name) for name in Settings.model_fields}
    ours = {name for name in environment if name.startswith(ENV_PREFIX)}
    assert ours and ours <= known, f"not settings: {sorted(ours - known)}"
    for variable in list(os.environ):
        if variable.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(variable)
    for name, value in environment.items():
        monkeypatch.setenv(name, str(value))
    settings = load_settings()
    assert (settings.log, settings.store) == ("kafka", "cassandra")
    assert settings.kafka_bootstrap == "kafka:9092"  # the containers' listener, not the host's


def test_the_images_are_the_versions_the_launcher_runs(compose):
    services = compose["services"]
    assert services["kafka"]["image"] == f"apache/kafka:{KAFKA_VERSION}"
    major_minor = ".".join(CASSANDRA_VERSION.split(".")[:2])
    assert services["cassandra"]["image"] == f"cassandra:{major_minor}"


def test_workers_wait_for_healthy_servers_and_restart(compose):
    worker = compose["services"]["worker"]
    assert worker["depends_on"] == {
        "kafka": {"condition": "service_healthy"},
        "cassandra": {"condition": "service_healthy"},
    }
    assert worker["restart"] == "unless-stopped"
    for server in ("kafka", "cassandra"):
        assert compose["services"][server]["healthcheck"]["test"]
    # `--scale worker=3` needs workers without a fixed name or host port.
    assert "container_name" not in worker and "ports" not in worker


def test_the_image_builds_from_files_that_exist():
    dockerfile = (DOCKER / "Dockerfile").read_text()
    root = DOCKER.parent
    copied = [line.split()[1:-1] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    assert copied, "the Dockerfile copies nothing"
    for sources in copied:
        for source in sources:
            assert (root / source).exists(), f"COPY {source}: no such file in the repository"
    assert 'CMD ["scheduler", "worker"]' in dockerfile


@pytest.mark.parametrize("state", ["running", "stalled"])
def test_the_workers_healthcheck_fails_exactly_when_liveness_does(compose, state):
    """The compose healthcheck's command, run against a probe server on a free port: exit 0 for
    a live worker, non-zero for a stuck one (urlopen raises on the 503)."""
    worker = compose["services"]["worker"]
    port = str(worker["environment"]["SCHEDULER_METRICS_PORT"])
    kind, program, flag, code = worker["healthcheck"]["test"]
    assert (kind, program, flag) == ("CMD", "python", "-c")
    assert f"http://127.0.0.1:{port}/healthz" in code
    health = Health(state=state, last_poll_s=0.1)
    server = serve(0, lambda: health, host="127.0.0.1")
    try:
        local = code.replace(f":{port}/", f":{server.server_port}/")
        checked = subprocess.run([sys.executable, "-c", local], capture_output=True, timeout=30)
    finally:
        server.shutdown()
        server.server_close()
    assert (checked.returncode == 0) == health.live, checked.stderr
