"""Who may call what: 401 without a valid token, 403 with too small a role, on every route the
OpenAPI document lists; tokens are kept hashed and shown once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler.api.auth import Role, TokenFile, token_hash
from tests.api.server import ApiServer
from tests.cli.conftest import SCRIPT


def _routes(client: httpx.Client) -> list[tuple[str, str, Role]]:
    document = client.get("/openapi.json").json()
    return [
        (method.upper(), path, Role(operation["x-role"]))
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "x-role" in operation
    ]


def _call(client: httpx.Client, method: str, path: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    body: Any = {} if method == "POST" else None
    return client.request(method, path, headers=headers, json=body)


def test_every_route_but_health_needs_a_role(client: httpx.Client) -> None:
    routes = _routes(client)
    assert len(routes) >= 12
    document = client.get("/openapi.json").json()
    unguarded = {path for path in document["paths"] if path not in {r[1] for r in routes}}
    assert unguarded == {"/api/v1/health"}


def test_without_a_token_every_route_is_a_401_that_says_what_to_send(
    client: httpx.Client,
) -> None:
    for method, path, _ in _routes(client):
        answer = _call(client, method, path, None)
        assert answer.status_code == 401, (method, path)
        assert answer.headers["WWW-Authenticate"] == "Bearer"
        assert "Authorization: Bearer" in answer.json()["message"]


def test_a_wrong_token_is_a_401_on_every_route(client: httpx.Client, tokens: Any) -> None:
    wrong = tokens[Role.ADMIN][:-2] + "xx"
    for method, path, _ in _routes(client):
        answer = _call(client, method, path, wrong)
        assert answer.status_code == 401, (method, path)
        assert "not a token of this API" in answer.json()["message"]


@pytest.mark.parametrize("role", list(Role))
def test_each_role_reaches_what_it_may_and_is_refused_the_rest(
    client: httpx.Client, tokens: dict[Role, str], role: Role
) -> None:
    for method, path, needed in _routes(client):
        answer = _call(client, method, path, tokens[role])
        if role.allows(needed):
            assert answer.status_code not in (401, 403), (method, path, answer.text)
        else:
            assert answer.status_code == 403, (method, path)
            assert f"needs the {needed} role" in answer.json()["message"]


def test_health_needs_no_token(client: httpx.Client) -> None:
    answer = client.get("/api/v1/health")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "store": "ok", "log": "ok"}


def test_whoami_names_the_token_and_its_role(client: httpx.Client, server: ApiServer) -> None:
    token = server.tokens.create(Role.OPERATE, "ci-bot")
    answer = client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert answer.json() == {"name": "ci-bot", "role": "operate"}


def test_a_revoked_token_is_refused_at_once(client: httpx.Client, server: ApiServer) -> None:
    token = server.tokens.create(Role.READ, "short-lived")
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/v1/whoami", headers=headers).status_code == 200
    assert TokenFile(server.tokens.path).revoke("short-lived")  # another process's view
    assert client.get("/api/v1/whoami", headers=headers).status_code == 401


def test_the_tokens_file_keeps_hashes_and_roles_never_tokens(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "tokens.json")
    token = tokens.create(Role.ADMIN, "me")
    text = (tmp_path / "tokens.json").read_text()
    assert token not in text
    (entry,) = json.loads(text)
    assert entry["sha256"] == token_hash(token) and entry["role"] == "admin"
    assert (tmp_path / "tokens.json").stat().st_mode & 0o077 == 0
    assert tokens.verify(token) is not None and tokens.verify(token + "x") is None


def test_a_second_token_of_the_same_name_is_refused(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "tokens.json")
    tokens.create(Role.READ, "me")
    with pytest.raises(Exception, match="a token named 'me' exists"):
        tokens.create(Role.ADMIN, "me")


def test_tokens_create_prints_the_token_once_and_the_file_keeps_its_hash(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    env = {"SCHEDULER_API_TOKENS_FILE": str(path), "SCHEDULER_DATA_DIR": str(tmp_path)}
    created = subprocess.run(
        [SCRIPT, "api", "tokens", "create", "--role", "operate", "--name", "ci"],
        capture_output=True,
        text=True,
        env={**_path_env(), **env},
        check=True,
    )
    token = created.stdout.strip()
    assert token.startswith("sch_") and len(token) > 40
    assert "shown once" in created.stderr and token not in created.stderr
    listed = subprocess.run(
        [SCRIPT, "api", "tokens", "list"],
        capture_output=True,
        text=True,
        env={**_path_env(), **env},
        check=True,
    )
    assert "ci" in listed.stdout and "operate" in listed.stdout and token not in listed.stdout
    entry = TokenFile(path).verify(token)
    assert entry is not None and entry.role is Role.OPERATE


def _path_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
