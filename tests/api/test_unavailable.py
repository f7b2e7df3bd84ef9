"""A store that Cassandra cannot answer for makes the API answer 503, saying to retry, not 500.

The routes run on a real server whose task store raises the driver's own exceptions, as a
Cassandra store lets them through when the cluster fails a read (`ReadFailure` is not retried).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import httpx
import pytest
from cassandra import (
    ConsistencyLevel,
    ReadFailure,
    ReadTimeout,
    Unavailable,
    WriteTimeout,
    WriteType,
)
from cassandra.cluster import NoHostAvailable

from scheduler.api.auth import Role
from scheduler.api.routers import tasks as tasks_router
from scheduler.runtime import connect
from tests.api.conftest import embedded_settings
from tests.api.server import ApiServer

ONE = ConsistencyLevel.ONE


class FailingStore:
    """The deployment's store, but every read of tasks raises `error`."""

    def __init__(self, store: Any, error: Exception) -> None:
        self._store = store
        self.error = error

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error

    list_tasks = load_tasks = fetch_statuses = attempts = _fail

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    data_dir = tmp_path_factory.mktemp("unavailable") / "data"
    connect(embedded_settings(data_dir)).close()
    api = ApiServer(embedded_settings(data_dir), data_dir.parent / "tokens.json").start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def failing(server: ApiServer) -> Iterator[FailingStore]:
    state = server.app.state.api
    real = state.store
    state.store = fake = FailingStore(real, RuntimeError("set by the test"))
    try:
        yield fake
    finally:
        state.store = real


def _get(server: ApiServer, path: str, **params: Any) -> httpx.Response:
    token = server.token(Role.READ)
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.get(server.url + path, params=params, headers=headers, timeout=30)


CLUSTER_ERRORS = [
    ReadFailure(
        "Replica(s) failed to execute read",
        consistency=ONE,
        required_responses=1,
        received_responses=0,
        failures=1,
    ),
    ReadTimeout(
        "Operation timed out - received only 0 responses.",
        consistency=ONE,
        required_responses=1,
        received_responses=0,
    ),
    Unavailable(
        "Cannot achieve consistency level ONE",
        consistency=ONE,
        required_replicas=1,
        alive_replicas=0,
    ),
    WriteTimeout(
        "Operation timed out",
        consistency=ONE,
        required_responses=1,
        received_responses=0,
        write_type=WriteType.SIMPLE,
    ),
    NoHostAvailable("Unable to connect to any servers", {"127.0.0.1:9042": OSError("refused")}),
]


@pytest.mark.parametrize("error", CLUSTER_ERRORS, ids=lambda e: type(e).__name__)
def test_a_task_listing_that_cassandra_cannot_answer_is_a_503_saying_to_retry(
    server: ApiServer, failing: FailingStore, error: Exception
) -> None:
    failing.error = error
    answer = _get(server, "/api/v1/tasks", ordering_id="orders-1")
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert body["error"] == "unavailable"
    assert "the store is unavailable" in body["message"]
    assert type(error).__name__ in body["message"]
    assert "retry" in body["message"]
    assert answer.headers["Retry-After"] == "5"


def test_getting_one_task_on_a_failing_read_is_a_503_too(
    server: ApiServer, failing: FailingStore
) -> None:
    failing.error = ReadFailure(
        "Replica(s) failed to execute read",
        consistency=ONE,
        required_responses=1,
        received_responses=0,
        failures=1,
    )
    answer = _get(
        server,
        "/api/v1/tasks/by-key",
        ordering_id="orders-1",
        scheduled_time="2026-01-01T00:00:00+00:00",
        uniqueness_key="a",
    )
    assert answer.status_code == 503, answer.text
    assert "ReadFailure" in answer.json()["message"]


def test_a_bug_in_the_store_is_still_a_500_not_blamed_on_cassandra(
    server: ApiServer, failing: FailingStore
) -> None:
    failing.error = RuntimeError("a bug")
    answer = _get(server, "/api/v1/tasks", ordering_id="orders-1")
    assert answer.status_code == 500, answer.text
    assert "unavailable" not in answer.json()["message"]


def test_the_real_store_answers_again_once_the_cluster_does(server: ApiServer) -> None:
    answer = _get(server, "/api/v1/tasks", ordering_id="orders-1")
    assert answer.status_code == 200, answer.text
    assert answer.json()["tasks"] == []


class SilentLog:
    """The deployment's client, but the log never acknowledges what is scheduled."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.sent: list[Future[int]] = []

    def _pending(self, *args: Any) -> Future[int]:
        self.sent.append(Future())
        return self.sent[-1]

    schedule_task = schedule_tasks = _pending

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            "/api/v1/tasks",
            {"ordering_id": "o", "scheduled_time": "2030-01-01T00:00:00Z", "uniqueness_key": "a"},
        ),
        (
            "/api/v1/tasks/batch",
            {
                "tasks": [
                    {
                        "ordering_id": "o",
                        "scheduled_time": "2030-01-01T00:00:00Z",
                        "uniqueness_key": k,
                    }
                    for k in "ab"
                ]
            },
        ),
    ],
)
def test_tasks_the_log_does_not_acknowledge_in_time_are_a_503_saying_to_send_them_again(
    server: ApiServer, monkeypatch: pytest.MonkeyPatch, path: str, body: dict[str, Any]
) -> None:
    state = server.app.state.api
    real, state.client = state.client, SilentLog(state.client)
    monkeypatch.setattr(tasks_router, "ACK_TIMEOUT_S", 0.2)
    try:
        headers = {"Authorization": f"Bearer {server.token(Role.OPERATE)}"}
        answer = httpx.post(server.url + path, json=body, headers=headers, timeout=30)
        late = state.client.sent
    finally:
        state.client = real
    assert answer.status_code == 503, answer.text
    message = answer.json()["message"]
    assert "did not acknowledge" in message and "send the same request again" in message
    late[0].set_result(2)  # a late acknowledgement finds the request gone, and nothing fails
    assert not late[0].cancelled()
