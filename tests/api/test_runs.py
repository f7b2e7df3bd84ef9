"""The programs and runs endpoints against a worker that runs the programs of a programs file."""

from __future__ import annotations

import html
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from scheduler.api.auth import Role
from scheduler.fleet import WorkerProcess
from scheduler.runtime import connect
from scheduler.settings import Settings
from tests.api.browser import browser, click, confirm, log_in, shoot, text, wait_text
from tests.api.conftest import ROOT, WORKER_ENV, wait_for
from tests.api.server import ApiServer

Call = Callable[..., httpx.Response]
__all__ = ["browser"]  # the fixture
PROGRAMS = f"""
[programs.hello]
kind = "command"
argv = ["{sys.executable}", "-c", "print('hello {{{{who}}}}')"]
properties = {{who = "world"}}
description = "says hello"

[programs.sleepy]
kind = "command"
argv = ["{sys.executable}", "-c", "import time; time.sleep(60)"]

[programs.broken]
kind = "command"
argv = ["{sys.executable}", "-c", "raise SystemExit(3)"]
"""


def _settings(data_dir: Path) -> Settings:
    return Settings(
        log="embedded",
        store="sqlite",
        data_dir=data_dir,
        partitions=4,
        executor="auto",
        programs_file=data_dir.parent / "programs.toml",
    )


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An embedded deployment whose worker runs the programs of `PROGRAMS`."""
    data_dir = tmp_path_factory.mktemp("runs") / "data"
    (data_dir.parent / "programs.toml").write_text(PROGRAMS)
    connect(_settings(data_dir)).close()
    env = {
        **WORKER_ENV,
        "SCHEDULER_EXECUTOR": "auto",
        "SCHEDULER_PROGRAMS_FILE": str(data_dir.parent / "programs.toml"),
        "SCHEDULER_DATA_DIR": str(data_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    worker = WorkerProcess(env, name="runs-worker", log_path=data_dir.parent / "worker.log")
    try:
        worker.wait_until_owning(60, at_least=4)
        yield data_dir
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def server(deployment: Path) -> Iterator[ApiServer]:
    api = ApiServer(_settings(deployment), deployment.parent / "tokens.json").start()
    try:
        yield api
    finally:
        api.stop()


def _run(as_role: Call, run_id: str) -> dict[str, object]:
    """The run, or an empty dict while the worker has not made it yet (a 404)."""
    answer = as_role(Role.READ, "GET", f"/api/v1/runs/{run_id}")
    assert answer.status_code in (200, 404), answer.text
    return dict(answer.json()) if answer.status_code == 200 else {}


def _start(as_role: Call, program: str, **body: object) -> str:
    answer = as_role(Role.OPERATE, "POST", f"/api/v1/programs/{program}/runs", json=body)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["run_id"])


def test_programs_are_listed_and_got_by_name(as_role: Call) -> None:
    listed = as_role(Role.READ, "GET", "/api/v1/programs").json()
    assert [p["name"] for p in listed] == ["broken", "hello", "sleepy"]
    hello = as_role(Role.READ, "GET", "/api/v1/programs/hello").json()
    assert hello["properties"] == {"who": "world"} and hello["description"] == "says hello"
    unknown = as_role(Role.READ, "GET", "/api/v1/programs/nope")
    assert unknown.status_code == 404
    assert "known programs: broken, hello, sleepy" in unknown.json()["message"]


def test_a_run_started_by_hand_completes_with_its_arguments(as_role: Call) -> None:
    run_id = _start(as_role, "hello", arguments={"who": "ops"})
    done = wait_for(lambda: (r := _run(as_role, run_id)).get("status") == "COMPLETED" and r)
    assert done["arguments"]["who"] == "ops"  # beside the system's own (_logical_time)
    assert done["started_by"].startswith("operator:api:operate-")
    listed = as_role(Role.READ, "GET", "/api/v1/runs", params={"program": "hello"}).json()
    assert run_id in [r["run_id"] for r in listed["runs"]]


def test_the_same_request_id_starts_one_run(as_role: Call) -> None:
    first = _start(as_role, "hello", request_id="nightly-2027-01-01")
    again = _start(as_role, "hello", request_id="nightly-2027-01-01")
    assert first == again


def test_a_failed_run_shows_its_error(
    as_role: Call, server: ApiServer, tokens: dict[Role, str]
) -> None:
    run_id = _start(as_role, "broken")
    failed = wait_for(lambda: (r := _run(as_role, run_id)).get("status") == "FAILED" and r)
    error = str(failed["last_error"])
    assert "exited with code 3" in error
    listed = as_role(Role.READ, "GET", "/api/v1/runs", params={"status": "FAILED"}).json()
    assert [r["run_id"] for r in listed["runs"]] == [run_id]
    assert listed["next_cursor"] is None
    # The page's cell leads with what failed, not with the exception's class and the task key;
    # the whole error is the cell's title.
    with httpx.Client(base_url=server.url) as viewer:
        viewer.post("/dashboard/login", data={"token": tokens[Role.READ]})
        page = viewer.get("/dashboard/runs", params={"status": "FAILED"}).text
    found = re.search(r'<td class="error" title="([^"]*)">([^<]*)</td>', page)
    assert found is not None, page
    title, cell = (html.unescape(part) for part in found.groups())
    assert title == error and cell.startswith(f"{sys.executable} exited with code 3")


def test_a_running_run_is_killed_and_killing_it_again_is_a_409(as_role: Call) -> None:
    run_id = _start(as_role, "sleepy")
    wait_for(lambda: _run(as_role, run_id).get("status") == "RUNNING")
    refused = as_role(Role.READ, "POST", f"/api/v1/runs/{run_id}/kill")
    assert refused.status_code == 403
    killed = as_role(Role.OPERATE, "POST", f"/api/v1/runs/{run_id}/kill")
    assert killed.status_code == 202, killed.text
    assert killed.json() == {"run_id": run_id, "killed_before_start": False}
    wait_for(lambda: _run(as_role, run_id).get("status") == "KILLED")
    again = as_role(Role.OPERATE, "POST", f"/api/v1/runs/{run_id}/kill")
    assert again.status_code == 409 and "already ended KILLED" in again.json()["message"]


def test_an_unknown_program_or_run_is_a_404(as_role: Call) -> None:
    assert as_role(Role.OPERATE, "POST", "/api/v1/programs/nope/runs", json={}).status_code == 404
    assert as_role(Role.READ, "GET", "/api/v1/runs/nope").status_code == 404
    assert as_role(Role.OPERATE, "POST", "/api/v1/runs/nope/kill").status_code == 404


def test_a_programs_file_that_does_not_parse_is_a_503_until_it_is_fixed(
    as_role: Call, deployment: Path
) -> None:
    # The operator's file is wrong, not the request: a 503 that names the file and its problem.
    file = deployment.parent / "programs.toml"
    file.write_text(PROGRAMS + "broken = [\n")
    try:
        for method, path in (("GET", "/api/v1/programs"), ("POST", "/api/v1/programs/hello/runs")):
            answer = as_role(Role.OPERATE, method, path, json={} if method == "POST" else None)
            assert answer.status_code == 503, answer.text
            body = answer.json()
            assert body["error"] == "unavailable"
            assert f"programs file '{file}' does not parse" in body["message"]
            assert body["message"].endswith("(the API answers again once the file is fixed)")
    finally:
        file.write_text(PROGRAMS)
    assert as_role(Role.READ, "GET", "/api/v1/programs").status_code == 200


def test_arguments_must_be_text(as_role: Call) -> None:
    body = {"arguments": {"who": ["rm", "-rf"]}}
    answer = as_role(Role.OPERATE, "POST", "/api/v1/programs/hello/runs", json=body)
    assert answer.status_code == 400
    assert answer.json()["fields"][0]["field"] == "body.arguments.who"


def test_the_runs_page_shows_a_run_and_an_operator_kills_it(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    run_id = _start(as_role, "sleepy", request_id="dashboard-kill")
    wait_for(lambda: _run(as_role, run_id).get("status") == "RUNNING")
    log_in(browser, server, tokens[Role.OPERATE])
    browser.get(f"{server.url}/dashboard/runs")
    row = f"#run-table tr[data-run='{run_id}']"
    wait_text(browser, f"{row} .state", "RUNNING")
    shoot(browser, "runs.png")
    click(browser, f"{row} button[name=kill]")
    assert "Kill run" in confirm(browser)
    assert f"kill requested for run {run_id}" in text(browser, "message")
    wait_text(browser, f"{row} .state", "KILLED")


def test_a_read_token_sees_runs_but_may_not_kill_them(
    server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    run_id = _start(as_role, "hello", request_id="dashboard-read")
    wait_for(lambda: _run(as_role, run_id).get("status") == "COMPLETED")
    with httpx.Client(base_url=server.url) as viewer:
        viewer.post("/dashboard/login", data={"token": tokens[Role.READ]})
        page = viewer.get("/dashboard/runs", params={"program": "hello"})
        assert run_id in page.text and "COMPLETED" in page.text
        shown = _run(as_role, run_id)  # where the program's output went, on which worker
        output, worker = shown["output"], shown["worker"]
        assert output and f'title="output: {output} on {worker}"' in page.text
        assert worker == "runs-worker"  # the client id the deployment gave its worker
        refused = viewer.post("/dashboard/runs/kill", data={"run_id": run_id})
        assert refused.status_code == 403 and "kill needs the operate role" in refused.text


def test_runs_are_paged_with_the_next_cursor_and_a_foreign_cursor_is_a_400(
    as_role: Call,
) -> None:
    started = [_start(as_role, "hello", request_id=f"paged-{i}") for i in range(3)]
    wait_for(lambda: all(_run(as_role, run_id).get("status") == "COMPLETED" for run_id in started))
    whole = as_role(Role.READ, "GET", "/api/v1/runs", params={"program": "hello", "limit": 1000})
    expected = [r["run_id"] for r in whole.json()["runs"]]
    assert set(started) <= set(expected)

    seen: list[str] = []
    params: dict[str, object] = {"program": "hello", "limit": 2}
    while True:
        page = as_role(Role.READ, "GET", "/api/v1/runs", params=params).json()
        assert len(page["runs"]) <= 2
        seen += [r["run_id"] for r in page["runs"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert seen == expected

    refused = as_role(Role.READ, "GET", "/api/v1/runs", params={"cursor": "not-a-cursor"})
    assert refused.status_code == 400
    assert "is not a `next_cursor` of a runs listing" in refused.json()["message"]


def test_the_runs_page_links_to_the_older_runs(
    server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    started = [_start(as_role, "hello", request_id=f"older-{i}") for i in range(2)]
    wait_for(lambda: all(_run(as_role, run_id).get("status") == "COMPLETED" for run_id in started))
    newest = as_role(Role.READ, "GET", "/api/v1/runs", params={"program": "hello", "limit": 2})
    first, second = (r["run_id"] for r in newest.json()["runs"])
    with httpx.Client(base_url=server.url) as viewer:
        viewer.post("/dashboard/login", data={"token": tokens[Role.READ]})
        page = viewer.get("/dashboard/runs", params={"program": "hello", "size": 1})
        assert f'data-run="{first}"' in page.text and f'data-run="{second}"' not in page.text
        older = page.text.split('id="older-runs" href="', 1)[1].split('"', 1)[0]
        following = viewer.get(older.replace("&amp;", "&"))
        assert f'data-run="{second}"' in following.text
        assert f'data-run="{first}"' not in following.text
