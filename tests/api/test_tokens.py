"""An admin makes, lists and revokes the API's tokens over HTTP; a token is shown once, and the
listing never shows a token or its hash."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from scheduler.api.auth import Role
from scheduler.runtime import connect
from tests.api.conftest import embedded_settings
from tests.api.server import ApiServer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    data_dir = tmp_path_factory.mktemp("tokens") / "data"
    connect(embedded_settings(data_dir)).close()
    api = ApiServer(embedded_settings(data_dir), data_dir.parent / "tokens.json").start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture(scope="module")
def admin(server: ApiServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {server.token(Role.ADMIN)}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        yield client


def _whoami(server: ApiServer, token: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.get(server.url + "/api/v1/whoami", headers=headers, timeout=30)


def test_a_token_made_by_an_admin_works_with_its_role_and_is_listed_without_its_secret(
    server: ApiServer, admin: httpx.Client
) -> None:
    made = admin.post("/api/v1/tokens", json={"name": "ci-bot", "role": "operate"})
    assert made.status_code == 201, made.text
    token = made.json()["token"]
    assert made.json()["name"] == "ci-bot" and made.json()["role"] == "operate"
    assert _whoami(server, token).json() == {"name": "ci-bot", "role": "operate"}
    listed = admin.get("/api/v1/tokens")
    assert listed.status_code == 200
    (bot,) = [entry for entry in listed.json() if entry["name"] == "ci-bot"]
    assert set(bot) == {"name", "role", "created"} and bot["role"] == "operate"
    entry = server.tokens.verify(token)
    assert entry is not None and token not in listed.text and entry.sha256 not in listed.text


def test_a_revoked_token_is_a_401_and_revoking_it_again_is_a_404(
    server: ApiServer, admin: httpx.Client
) -> None:
    token = admin.post("/api/v1/tokens", json={"name": "short", "role": "read"}).json()["token"]
    assert _whoami(server, token).status_code == 200
    assert admin.delete("/api/v1/tokens/short").status_code == 204
    assert _whoami(server, token).status_code == 401
    again = admin.delete("/api/v1/tokens/short")
    assert again.status_code == 404 and "no token is named 'short'" in again.json()["message"]


def test_a_taken_name_is_a_409_and_the_first_token_still_works(
    server: ApiServer, admin: httpx.Client
) -> None:
    first = admin.post("/api/v1/tokens", json={"name": "twice", "role": "read"}).json()["token"]
    second = admin.post("/api/v1/tokens", json={"name": "twice", "role": "admin"})
    assert second.status_code == 409 and "exists" in second.json()["message"]
    assert _whoami(server, first).json() == {"name": "twice", "role": "read"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "role": "root"}, "body.role"),
        ({"name": "", "role": "read"}, "body.name"),
        ({"name": "a b", "role": "read"}, "body.name"),
        ({"name": "x", "role": "read", "token": "sch_mine"}, "body.token"),
        ({"role": "read"}, "body.name"),
    ],
)
def test_a_body_off_the_schema_is_a_400_naming_the_field(
    admin: httpx.Client, body: dict[str, str], field: str
) -> None:
    answer = admin.post("/api/v1/tokens", json=body)
    assert answer.status_code == 400, answer.text
    assert field in [problem["field"] for problem in answer.json()["fields"]]


@pytest.mark.parametrize("role", [Role.READ, Role.OPERATE])
def test_only_an_admin_may_see_or_change_tokens(server: ApiServer, role: Role) -> None:
    headers = {"Authorization": f"Bearer {server.token(role)}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        answers = [
            client.get("/api/v1/tokens"),
            client.post("/api/v1/tokens", json={"name": "mine", "role": "admin"}),
            client.delete(f"/api/v1/tokens/{role}-0"),
        ]
    assert [answer.status_code for answer in answers] == [403, 403, 403]
    assert "mine" not in {entry.name for entry in server.tokens.entries()}
