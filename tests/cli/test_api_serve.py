"""`scheduler api` as users start it: over HTTPS with a certificate, and on Kafka + Cassandra."""

from __future__ import annotations

import os
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler.api.auth import Role, TokenFile
from tests.cli.conftest import SCRIPT
from tests.cli.helpers import wait_for
from tests.http import free_port

Serve = Callable[..., tuple[str, str]]


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Serve]:
    """Start `scheduler api` with the environment the test set up; its URL and an admin token.
    Stopped with SIGTERM at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, scheme: str = "http", verify: Any = True) -> tuple[str, str]:
        tokens = tmp_path / "tokens.json"
        monkeypatch.setenv("SCHEDULER_API_TOKENS_FILE", str(tokens))
        token = TokenFile(tokens).create(Role.ADMIN, f"admin-{len(started)}")
        port = free_port()
        process = subprocess.Popen(
            [SCRIPT, "api", "--port", str(port), *args],
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / "api.log", "a"),  # noqa: SIM115 - the child holds it
            env=dict(os.environ),
        )
        started.append(process)
        url = f"{scheme}://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/api/v1/health", verify=verify, timeout=5)
                return url, token
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "api.log").read_text()) from None
                time.sleep(0.2)

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=30)


def _certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    names = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *names, *files],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_the_api_serves_https_with_a_certificate_and_its_key(
    embedded: Path, serve: Serve, script: Any, tmp_path: Path
) -> None:
    assert script("enqueue", "orders-1", "--in", "1h").returncode == 0  # the deployment exists
    cert, key = _certificate(tmp_path)
    trusted = ssl.create_default_context(cafile=str(cert))
    url, token = serve("--cert", str(cert), "--key", str(key), scheme="https", verify=trusted)
    answer = httpx.get(
        f"{url}/api/v1/tasks",
        params={"ordering_id": "orders-1"},
        headers={"Authorization": f"Bearer {token}"},
        verify=trusted,
    )
    assert answer.status_code == 200, answer.text
    with pytest.raises(httpx.TransportError):
        httpx.get(url.replace("https:", "http:") + "/api/v1/health", timeout=5)
    assert token not in (tmp_path / "api.log").read_text()


def test_a_certificate_without_its_key_is_refused(embedded: Path, script: Any) -> None:
    result = script("api", "--cert", __file__)
    assert result.returncode == 2
    assert "TLS needs both a certificate and its key" in result.stderr


@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.slow
def test_the_api_schedules_lists_and_shows_the_fleet_on_kafka_and_cassandra(
    distributed: dict[str, str], script: Any, worker: Any, serve: Serve, monkeypatch: Any
) -> None:
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "noop")
    applied = script("schema", "apply")
    assert applied.returncode == 0, applied.stderr
    worker()
    url, token = serve()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        due = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
        tasks = [
            {"ordering_id": f"dist-{n}", "scheduled_time": due, "uniqueness_key": "k"}
            for n in range(5)
        ]
        answer = client.post("/api/v1/tasks/batch", json={"tasks": tasks})
        assert answer.status_code == 201, answer.text

        def succeeded() -> list[str]:
            page = client.get("/api/v1/tasks", params={"state": "succeeded"}).json()
            return sorted(t["ordering_id"] for t in page["tasks"])

        assert wait_for(lambda: succeeded() == [f"dist-{n}" for n in range(5)], timeout=90)
        fleet = client.get("/api/v1/fleet").json()
        assert fleet["topic"] == distributed["SCHEDULER_TOPIC"]
        assert len(fleet["workers"]) == 1 and fleet["lag"] == 0
        late = {**tasks[0], "scheduled_time": "2001-01-01T00:00:00Z"}
        refused = client.post("/api/v1/tasks", json=late)
        assert refused.status_code == 400 and "grace window" in refused.json()["message"]


@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.slow
def test_the_api_creates_enables_and_lists_schedules_on_kafka_and_cassandra(
    distributed: dict[str, str],
    script: Any,
    worker: Any,
    serve: Serve,
    monkeypatch: Any,
    tmp_path: Path,
) -> None:
    programs = tmp_path / "programs.toml"
    programs.write_text('[programs.clean]\nkind = "command"\nargv = ["true"]\n')
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")
    monkeypatch.setenv("SCHEDULER_PROGRAMS_FILE", str(programs))
    applied = script("schema", "apply")
    assert applied.returncode == 0, applied.stderr
    worker()
    url, token = serve()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        body = {"program": "clean", "trigger": {"type": "TIME", "cronExpression": "5 * * * *"}}
        created = client.put("/api/v1/schedules/dist-hourly", json=body)
        assert created.status_code == 201, created.text
        enabled = client.post("/api/v1/schedules/dist-hourly/enable")
        assert enabled.status_code == 200, enabled.text
        (fire,) = enabled.json()["next_fire_times"]
        assert datetime.fromisoformat(fire).minute == 5
        listed = client.get("/api/v1/schedules", params={"status": "ENABLED"}).json()
        assert [s["name"] for s in listed] == ["dist-hourly"]
        assert client.post("/api/v1/schedules/dist-hourly/enable").status_code == 409
