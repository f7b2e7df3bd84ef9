"""Fixtures of the API tests: an embedded deployment with a worker process, the API served on a
free port of 127.0.0.1 by uvicorn, and a token of each role.

One deployment serves a whole test module (starting a worker takes seconds); tests keep apart by
using ordering ids of their own (`ordering_id`).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler.api.auth import Role
from scheduler.fleet import WorkerProcess
from scheduler.runtime import connect
from scheduler.settings import Settings
from tests.api.server import ApiServer

ROOT = Path(__file__).resolve().parents[2]
WORKER_ENV = {
    "SCHEDULER_LOG": "embedded",
    "SCHEDULER_STORE": "sqlite",
    "SCHEDULER_PARTITIONS": "4",
    "SCHEDULER_EXECUTOR": "tests.api.executors:flaky",
    "SCHEDULER_RETRY_MAX_ATTEMPTS": "1",
    "SCHEDULER_TASK_LOG_LEVEL": "WARNING",
    "SCHEDULER_STATUS_FLUSH_MS": "0",
}


def embedded_settings(data_dir: Path) -> Settings:
    return Settings(
        log="embedded",
        store="sqlite",
        data_dir=data_dir,
        partitions=4,
        executor="noop",
        retry_max_attempts=1,
    )


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An embedded data dir with its topic, and a worker process running `flaky`."""
    data_dir = tmp_path_factory.mktemp("api") / "data"
    connect(embedded_settings(data_dir)).close()  # the topic, as a producer makes it
    env = {
        **WORKER_ENV,
        "SCHEDULER_DATA_DIR": str(data_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    worker = WorkerProcess(env, name="api-test-worker", log_path=data_dir.parent / "worker.log")
    try:
        worker.wait_until_owning(60, at_least=4)
        yield data_dir
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def server(deployment: Path) -> Iterator[ApiServer]:
    api = ApiServer(embedded_settings(deployment), deployment.parent / "tokens.json").start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture(scope="module")
def idle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """An API server over an embedded deployment with its topic but no worker, one per module:
    for routes that need no task to run (tokens, a store made to fail). A module whose tests
    take `server` overrides that fixture with one that returns this."""
    data_dir = tmp_path_factory.mktemp("idle") / "data"
    connect(embedded_settings(data_dir)).close()  # the topic, as a producer makes it
    api = ApiServer(embedded_settings(data_dir), data_dir.parent / "tokens.json").start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture(scope="module")
def tokens(server: ApiServer) -> dict[Role, str]:
    return {role: server.token(role) for role in Role}


@pytest.fixture(scope="module")
def client(server: ApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


@pytest.fixture
def as_role(client: httpx.Client, tokens: dict[Role, str]) -> Callable[..., httpx.Response]:
    """`as_role(Role.ADMIN, "POST", "/api/v1/tasks", json=...)`."""

    def call(role: Role, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {tokens[role]}", **kwargs.pop("headers", {})}
        return client.request(method, path, headers=headers, **kwargs)

    return call


@pytest.fixture
def ordering_id() -> str:
    return f"orders-{uuid.uuid4().hex[:8]}"


def wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "the condition") -> Any:
    """Poll `check` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)
