"""`scheduler worker --api`: the REST API and the dashboard served by a worker process."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler.api.auth import Role, TokenFile
from tests.cli.conftest import SCRIPT
from tests.cli.helpers import wait_for
from tests.http import free_port


@pytest.fixture
def token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An operate token in the tokens file the worker reads."""
    tokens = tmp_path / "tokens.json"
    monkeypatch.setenv("SCHEDULER_API_TOKENS_FILE", str(tokens))
    return TokenFile(tokens).create(Role.OPERATE, "ops")


@pytest.fixture
def start() -> Iterator[Any]:
    """Start `scheduler worker ARGS...`; each is stopped with SIGTERM at the end."""
    started: list[subprocess.Popen[str]] = []

    def run(*args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [SCRIPT, "worker", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        started.append(process)
        return process

    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def _serving(url: str, process: subprocess.Popen[str]) -> bool:
    if process.poll() is not None:
        raise AssertionError(process.communicate()[1])
    try:
        return httpx.get(f"{url}/api/v1/health", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out, err


def _schedule_and_see_it_succeed(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        due = (datetime.now(UTC) + timedelta(milliseconds=200)).isoformat()
        task = {"ordering_id": "from-the-worker", "scheduled_time": due, "uniqueness_key": "k"}
        answer = client.post("/api/v1/tasks", json=task)
        assert answer.status_code == 201, answer.text

        def states() -> list[str]:
            page = client.get("/api/v1/tasks", params={"ordering_id": "from-the-worker"})
            return [t["state"] for t in page.json()["tasks"]]

        assert wait_for(lambda: states() == ["succeeded"], timeout=60)
        assert client.get("/dashboard/login").status_code == 200


def test_a_worker_started_with_api_serves_the_api_and_runs_what_it_schedules(
    embedded: Path, token: str, start: Any
) -> None:
    port = free_port()
    process = start("--api", f"127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}"
    assert wait_for(lambda: _serving(url, process), timeout=60)
    _schedule_and_see_it_succeed(url, token)
    out, _ = _stop(process)
    assert f"API and dashboard at {url}/dashboard" in out
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/api/v1/health", timeout=5)


def test_the_worker_api_setting_serves_it_on_the_api_port(
    embedded: Path, token: str, start: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv("SCHEDULER_WORKER_API", "true")
    monkeypatch.setenv("SCHEDULER_API_PORT", str(port))
    process = start()
    url = f"http://127.0.0.1:{port}"
    assert wait_for(lambda: _serving(url, process), timeout=60)
    unauthorised = httpx.get(f"{url}/api/v1/tasks", timeout=5)
    assert unauthorised.status_code == 401
    _stop(process)


def test_a_taken_api_port_stops_the_worker_with_the_address_named(
    embedded: Path, token: str, start: Any
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = start("--api", f"127.0.0.1:{port}")
        _, err = process.communicate(timeout=120)
    assert process.returncode != 0
    assert f"the API could not be served on 127.0.0.1:{port}" in err


def test_an_api_address_that_is_not_host_and_port_is_refused(embedded: Path, start: Any) -> None:
    process = start("--api", "localhost:http")
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "'localhost:http' is not [HOST:]PORT" in err


@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.slow
def test_a_worker_serves_the_api_on_kafka_and_cassandra(
    distributed: dict[str, str],
    script: Any,
    token: str,
    start: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "noop")
    applied = script("schema", "apply")
    assert applied.returncode == 0, applied.stderr
    port = free_port()
    process = start("--api", str(port))
    url = f"http://127.0.0.1:{port}"
    assert wait_for(lambda: _serving(url, process), timeout=120)
    _schedule_and_see_it_succeed(url, token)
    _stop(process)
