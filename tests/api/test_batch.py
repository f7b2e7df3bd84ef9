"""The batch-job endpoints against a worker that runs batch jobs: load and check a configuration,
read partitions by status, re-run a failed one, pause and resume; each error code and role.

The tests that need the jobs take `loaded`, which loads them unless a test did already, so any
of them runs alone; in the file's order the load test loads them first and re-runs flaky's first
partition, and the grid test its second."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from scheduler.api.auth import Role
from tests.api.browser import browser, click, confirm, log_in, shoot, text
from tests.api.conftest import wait_for
from tests.api.programs import programs_deployment
from tests.api.server import ApiServer
from tests.batch.helpers import seed_config, seed_job

Call = Callable[..., httpx.Response]
__all__ = ["browser"]  # the fixture
PROGRAMS = f"""
[programs.hello]
kind = "command"
argv = ["{sys.executable}", "-c", "print('hello')"]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    data_dir = tmp_path_factory.mktemp("batch") / "data"
    # A batch file makes the worker run the `batch` route; it is never written: the API loads.
    batch_file = str(data_dir.parent / "jobs.json")
    with programs_deployment(
        data_dir, PROGRAMS, "batch-worker", SCHEDULER_BATCH_FILE=batch_file
    ) as api:
        yield api


@pytest.fixture(scope="module")
def marker(server: ApiServer) -> Path:
    """While this file is missing, job `flaky` fails."""
    return server.settings.data_dir.parent / "flaky-may-succeed"


def _config(marker: Path) -> str:
    steady = seed_job(
        "steady", command=[sys.executable, "-c", "pass"], end_partition="2000-01-01 02:00:00"
    )
    flaky = seed_job(
        "flaky",
        command=[
            sys.executable,
            "-c",
            f"import os, sys; sys.exit(0 if os.path.exists({str(marker)!r}) else 3)",
        ],
        end_partition="2000-01-01 02:00:00",
        retry_delay="1 days",
    )
    return json.dumps(seed_config(steady, flaky))


@pytest.fixture(scope="module")
def loaded(client: httpx.Client, tokens: dict[Role, str], marker: Path) -> None:
    """The configuration of `_config` in force and its first runs ended: steady's two partitions
    succeeded, flaky's two failed (or, after the load test, the first re-run). Loaded here
    unless a test loaded it already (the load test, which checks its own load)."""

    def as_role(role: Role, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return client.request(
            method, path, headers={"Authorization": f"Bearer {tokens[role]}"}, **kwargs
        )

    text = _config(marker)
    configuration = as_role(Role.READ, "GET", "/api/v1/batch/configuration")
    if configuration.status_code == 404 or configuration.json()["text"] != text:
        answer = as_role(Role.ADMIN, "PUT", "/api/v1/batch/configuration", json={"text": text})
        assert answer.status_code == 202, answer.text

    def ended(job: str) -> int:
        return sum(len(_partitions(as_role, job, status=s)) for s in ("FAILED", "SUCCEEDED"))

    wait_for(
        lambda: ended("flaky") == 2 and ended("steady") == 2,
        timeout=90,
        what="the first runs of steady's and flaky's partitions to end",
    )
    assert len(_partitions(as_role, "steady", status="SUCCEEDED")) == 2


def _partitions(as_role: Call, job: str, **params: Any) -> list[dict[str, Any]]:
    """The job's partitions; none while the worker has not applied the load yet (a 404)."""
    answer = as_role(Role.READ, "GET", f"/api/v1/batch/jobs/{job}/partitions", params=params)
    assert answer.status_code in (200, 404), answer.text
    if answer.status_code == 404:
        return []
    return list(answer.json())


def test_before_any_load_the_configuration_is_a_404(idle_server: ApiServer) -> None:
    # A deployment of its own: the module's may have a configuration loaded by any other test.
    headers = {"Authorization": f"Bearer {idle_server.token(Role.READ)}"}
    with httpx.Client(base_url=idle_server.url, timeout=30) as http:
        answer = http.get("/api/v1/batch/configuration", headers=headers)
        listed = http.get("/api/v1/batch/jobs", headers=headers)
    assert answer.status_code == 404 and "scheduler jobs load" in answer.json()["message"]
    assert (listed.status_code, listed.json()) == (200, [])  # a listing of none, not a 404


def test_a_bad_configuration_is_a_400_listing_every_problem(as_role: Call) -> None:
    bad = seed_config(seed_job("a", increment="0 hours"), seed_job("a"))
    for method, path in [("POST", "/configuration/check"), ("PUT", "/configuration")]:
        answer = as_role(Role.ADMIN, method, f"/api/v1/batch{path}", json={"text": json.dumps(bad)})
        assert answer.status_code == 400, answer.text
        message = answer.json()["message"]
        assert "jobs[0].increment" in message and "jobs[1].name" in message
        # Each problem in `fields` too: the request's field is `text`, the problem says where
        # in the file.
        fields = answer.json()["fields"]
        assert {f["field"] for f in fields} == {"body.text"}
        problems = [f["problem"] for f in fields]
        assert any(p.startswith("jobs[0].increment (job 'a'): ") for p in problems), problems
        assert any(p.startswith("jobs[1].name") for p in problems), problems


def test_loading_needs_the_admin_role(as_role: Call, marker: Path) -> None:
    body = {"text": _config(marker)}
    answer = as_role(Role.OPERATE, "PUT", "/api/v1/batch/configuration", json=body)
    assert answer.status_code == 403 and "needs the admin role" in answer.json()["message"]


def test_a_loaded_configuration_runs_and_a_failed_partition_is_rerun(
    as_role: Call, marker: Path
) -> None:
    text = _config(marker)
    checked = as_role(Role.ADMIN, "POST", "/api/v1/batch/configuration/check", json={"text": text})
    assert checked.json() == {"jobs": ["steady", "flaky"]}
    loaded = as_role(Role.ADMIN, "PUT", "/api/v1/batch/configuration", json={"text": text})
    assert loaded.status_code == 202, loaded.text
    failed = wait_for(
        lambda: len(_partitions(as_role, "flaky", status="FAILED")) == 2,
        timeout=90,
        what="flaky's two partitions to fail",
    )
    assert failed
    configuration = as_role(Role.READ, "GET", "/api/v1/batch/configuration").json()
    assert configuration["text"] == text and configuration["source"].startswith("api:admin-")
    counts = {job["name"]: job for job in configuration["jobs"]}
    wait_for(lambda: _jobs(as_role)["steady"]["succeeded"] == 2, what="steady to succeed")
    assert counts["flaky"]["total"] == 2
    first, _ = _partitions(as_role, "flaky")
    assert first["partition"] == "2000-01-01 00:00:00" and first["status"] == "FAILED"
    assert first["retry_time"] and first["attempts"] == 1

    marker.write_text("")
    body = {"from_time": "2000-01-01T00:00:00Z", "to_time": "2000-01-01T01:00:00Z"}
    answer = as_role(Role.OPERATE, "POST", "/api/v1/batch/jobs/flaky/rerun", json=body)
    assert answer.status_code == 202, answer.text
    wait_for(
        lambda: [p["status"] for p in _partitions(as_role, "flaky")] == ["SUCCEEDED", "FAILED"],
        timeout=60,
        what="the first partition to succeed on its rerun, the second to stay failed",
    )
    backwards = {"from_time": body["to_time"], "to_time": body["from_time"]}
    refused = as_role(Role.OPERATE, "POST", "/api/v1/batch/jobs/flaky/rerun", json=backwards)
    assert refused.status_code == 400 and "must be after" in refused.json()["message"]


def _jobs(as_role: Call) -> dict[str, dict[str, Any]]:
    return {job["name"]: job for job in as_role(Role.READ, "GET", "/api/v1/batch/jobs").json()}


@pytest.mark.usefixtures("loaded")
def test_pause_and_resume_show_in_the_job_list(as_role: Call) -> None:
    assert as_role(Role.READ, "POST", "/api/v1/batch/jobs/steady/pause").status_code == 403
    assert as_role(Role.OPERATE, "POST", "/api/v1/batch/jobs/steady/pause").status_code == 202
    wait_for(lambda: _jobs(as_role)["steady"]["paused"], what="steady to be paused")
    assert as_role(Role.OPERATE, "POST", "/api/v1/batch/jobs/steady/resume").status_code == 202
    wait_for(lambda: not _jobs(as_role)["steady"]["paused"], what="steady to be resumed")


@pytest.mark.usefixtures("loaded")
def test_an_unknown_job_is_a_404_naming_the_jobs(as_role: Call) -> None:
    for method, path in [
        ("GET", "/api/v1/batch/jobs/nope/partitions"),
        ("POST", "/api/v1/batch/jobs/nope/pause"),
        ("POST", "/api/v1/batch/jobs/nope/resume"),
    ]:
        answer = as_role(Role.OPERATE, method, path)
        assert answer.status_code == 404, (method, path, answer.text)
        assert "no batch job is named 'nope'" in answer.json()["message"]


@pytest.mark.usefixtures("loaded")
def test_an_operator_reruns_a_failed_partition_from_the_grid(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str], as_role: Call, marker: Path
) -> None:
    marker.write_text("")  # the rerun succeeds
    log_in(browser, server, tokens[Role.OPERATE])
    browser.get(f"{server.url}/dashboard/batch")
    row, cell = "#batch-table tr[data-job='flaky']", ".cell[data-partition='2000-01-01 01:00:00']"
    WebDriverWait(browser, 30).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, f"{row} button{cell}")
    )
    shoot(browser, "batch.png")
    click(browser, f"{row} button{cell}")
    assert "Re-run flaky 2000-01-01 01:00:00?" in confirm(browser)
    assert "re-run of flaky 2000-01-01 01:00:00 requested" in text(browser, "message")
    WebDriverWait(browser, 60, poll_frequency=0.3).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, f"{row} i{cell}[data-status=SUCCEEDED]")
    )


@pytest.mark.usefixtures("loaded")
def test_a_read_token_sees_the_grid_but_may_not_rerun(
    server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    with httpx.Client(base_url=server.url) as viewer:
        viewer.post("/dashboard/login", data={"token": tokens[Role.READ]})
        page = viewer.get("/dashboard/batch", params={"status": "SUCCEEDED"})
        assert 'data-job="steady"' in page.text and 'data-status="SUCCEEDED"' in page.text
        none = viewer.get("/dashboard/batch", params={"status": "BLOCKED_FOREVER"})
        assert 'data-job="steady"' in none.text and "data-partition=" not in none.text
        form = {"verb": "rerun", "job": "flaky", "partition": "946684800000"}
        refused = viewer.post("/dashboard/batch/act", data=form)
        assert refused.status_code == 403 and "rerun needs the operate role" in refused.text
        # The runs page says which partition each run was for, and holds every run's whole id
        # (its first 8 characters show) for `scheduler runs show`.
        runs = viewer.get("/dashboard/runs").text
        assert "batch-job:steady" in runs and "for 2000-01-01 01:00:00 UTC" in runs
        some = as_role(Role.READ, "GET", "/api/v1/runs").json()["runs"][0]["run_id"]
        assert '<code class="run-id"' in runs and f"{some}</code>" in runs
