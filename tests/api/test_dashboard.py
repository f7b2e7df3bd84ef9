"""The dashboard over plain HTTP: its login, its session cookie, its static files."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from scheduler.api.auth import Role
from tests.api.server import ApiServer

TEMPLATES = Path(__file__).resolve().parents[2] / "scheduler" / "dashboard" / "templates"


def test_a_page_without_a_session_sends_the_viewer_to_log_in(client: httpx.Client) -> None:
    for path in ("/dashboard", "/dashboard/tasks?ordering_id=x", "/"):
        answer = client.get(path, follow_redirects=True)
        assert answer.url.path == "/dashboard/login", path
        assert 'name="token"' in answer.text


def test_a_login_sets_an_httponly_strict_cookie_that_holds_no_token(
    server: ApiServer, tokens: dict[Role, str]
) -> None:
    with httpx.Client(base_url=server.url) as browser:
        answer = browser.post("/dashboard/login", data={"token": tokens[Role.READ]})
        assert answer.status_code == 303 and answer.headers["location"] == "/dashboard"
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert tokens[Role.READ] not in cookie
        assert "api-test-worker" in browser.get("/dashboard").text
        browser.post("/dashboard/logout")
        assert browser.get("/dashboard").status_code == 303


def test_a_wrong_token_is_a_401_page(client: httpx.Client) -> None:
    answer = client.post("/dashboard/login", data={"token": "sch_wrong"})
    assert answer.status_code == 401 and "not a token of this API" in answer.text


def test_an_action_beyond_the_role_is_refused_by_the_server(
    server: ApiServer, tokens: dict[Role, str]
) -> None:
    with httpx.Client(base_url=server.url) as browser:
        browser.post("/dashboard/login", data={"token": tokens[Role.OPERATE]})
        form = {"verb": "drop", "ordering_id": "x", "scheduled_ms": "0", "uniqueness_key": "y"}
        answer = browser.post("/dashboard/tasks/action", data=form)
        assert answer.status_code == 403
        assert "drop needs the admin role" in answer.text
        answer = browser.post("/dashboard/tasks/action", data={**form, "verb": "rm -rf"})
        assert answer.status_code == 400


def test_htmx_is_served_from_the_package_and_no_page_loads_a_script_from_elsewhere(
    client: httpx.Client,
) -> None:
    answer = client.get("/dashboard/static/htmx.min.js")
    assert answer.status_code == 200 and answer.text.startswith("var htmx=")
    for template in TEMPLATES.glob("*.html"):
        sources = re.findall(r'src="([^"]+)"', template.read_text())
        assert all(source.startswith("/dashboard/static/") for source in sources), template
