"""The schedules endpoints against a worker that runs programs (and so applies schedule changes):
the seeds' REST semantics, each error code, each role's limits."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from scheduler.api.auth import Role
from scheduler.api.schemas import ScheduleOut
from tests.api.browser import browser, click, confirm, log_in, shoot, text, wait_text
from tests.api.conftest import wait_for
from tests.api.programs import programs_deployment
from tests.api.server import ApiServer

Call = Callable[..., httpx.Response]
__all__ = ["browser"]  # the fixture
PROGRAMS = f"""
[programs.clean]
kind = "command"
argv = ["{sys.executable}", "-c", "print('clean')"]

[programs.load]
kind = "command"
argv = ["{sys.executable}", "-c", "print('load')"]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """The API over a deployment whose worker runs programs, and so applies schedule changes."""
    data_dir = tmp_path_factory.mktemp("schedules") / "data"
    with programs_deployment(data_dir, PROGRAMS, "schedules-worker") as api:
        yield api


@pytest.fixture
def name() -> str:
    return f"hourly-{uuid.uuid4().hex[:8]}"


def _hourly(name: str | None = None, program: str = "clean") -> dict[str, object]:
    body: dict[str, object] = {
        "program": {"programName": program},
        "trigger": {"type": "TIME", "cronExpression": "5 * * * *"},
        "description": "every hour",
    }
    return body if name is None else {**body, "name": name}


def _create(as_role: Call, name: str, **body: object) -> dict[str, object]:
    answer = as_role(Role.ADMIN, "PUT", f"/api/v1/schedules/{name}", json=_hourly(**body))
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_a_schedule_is_created_disabled_and_read_back(as_role: Call, name: str) -> None:
    created = _create(as_role, name)
    assert created["status"] == "DISABLED" and created["trigger_type"] == "TIME"
    assert created["program"] == "clean" and str(created["source"]).startswith("api:admin-")
    got = as_role(Role.READ, "GET", f"/api/v1/schedules/{name}").json()
    assert got["schedule"]["description"] == "every hour"
    assert got["schedule"]["trigger"]["cronExpression"] == "5 * * * *"


def test_a_body_naming_another_schedule_is_a_400_and_creates_nothing(
    as_role: Call, name: str
) -> None:
    answer = as_role(Role.ADMIN, "PUT", f"/api/v1/schedules/{name}", json=_hourly("other"))
    assert answer.status_code == 400
    assert "the body names schedule 'other'" in answer.json()["message"]
    assert as_role(Role.READ, "GET", f"/api/v1/schedules/{name}").status_code == 404


def test_a_body_that_is_no_schedule_is_a_400_naming_the_field(as_role: Call, name: str) -> None:
    body = {"program": "clean", "trigger": {"type": "TIME", "cronExpression": "61 * * * *"}}
    body |= {"timeZone": "Mars/Olympus", "timeoutMillis": 0}
    answer = as_role(Role.ADMIN, "PUT", f"/api/v1/schedules/{name}", json=body)
    assert answer.status_code == 400
    assert "trigger" in answer.json()["message"]
    fields = {f["field"]: f["problem"] for f in answer.json()["fields"]}
    assert sorted(fields) == ["body.timeZone", "body.timeoutMillis", "body.trigger.cronExpression"]
    assert "unknown time zone 'Mars/Olympus'" in fields["body.timeZone"]


def test_an_unknown_program_is_refused_naming_the_known_ones(as_role: Call, name: str) -> None:
    answer = as_role(Role.ADMIN, "PUT", f"/api/v1/schedules/{name}", json=_hourly(program="nope"))
    assert answer.status_code == 404
    assert "clean" in answer.json()["message"]


def test_creating_an_existing_schedule_is_a_409(as_role: Call, name: str) -> None:
    _create(as_role, name)
    again = as_role(Role.ADMIN, "PUT", f"/api/v1/schedules/{name}", json=_hourly())
    assert again.status_code == 409 and "exist already" in again.json()["message"]


def test_enable_gives_next_fires_and_enabling_twice_is_a_409(as_role: Call, name: str) -> None:
    _create(as_role, name)
    enabled = as_role(Role.OPERATE, "POST", f"/api/v1/schedules/{name}/enable")
    assert enabled.status_code == 200, enabled.text
    assert enabled.json()["status"] == "ENABLED"
    (next_fire,) = enabled.json()["next_fire_times"]
    assert datetime.fromisoformat(next_fire).minute == 5
    again = as_role(Role.OPERATE, "POST", f"/api/v1/schedules/{name}/enable")
    assert again.status_code == 409 and "enabled already" in again.json()["message"]
    disabled = as_role(Role.OPERATE, "POST", f"/api/v1/schedules/{name}/disable")
    assert disabled.json()["status"] == "DISABLED" and disabled.json()["disabled_time"]
    twice = as_role(Role.OPERATE, "POST", f"/api/v1/schedules/{name}/disable")
    assert twice.status_code == 409 and "disabled already" in twice.json()["message"]


def test_an_update_changes_the_fields_given_and_keeps_the_rest(as_role: Call, name: str) -> None:
    before = _create(as_role, name)
    body = {"trigger": {"type": "TIME", "cronExpression": "30 2 * * *"}}
    answer = as_role(Role.ADMIN, "POST", f"/api/v1/schedules/{name}/update", json=body)
    assert answer.status_code == 200, answer.text
    after = answer.json()
    assert after["schedule"]["trigger"]["cronExpression"] == "30 2 * * *"
    assert after["schedule"]["description"] == "every hour"
    assert int(after["revision"]) > int(str(before["revision"]))
    moved = {"program": {"programName": "load"}}
    refused = as_role(Role.ADMIN, "POST", f"/api/v1/schedules/{name}/update", json=moved)
    assert refused.status_code == 400 and "cannot change" in refused.json()["message"]


def test_next_and_previous_run_times_follow_the_cron(as_role: Call, name: str) -> None:
    _create(as_role, name)
    following = as_role(Role.READ, "GET", f"/api/v1/schedules/{name}/next-runs?count=3").json()
    times = [datetime.fromisoformat(t) for t in following["times"]]
    assert len(times) == 3 and all(t.minute == 5 for t in times)
    assert times[1] - times[0] == timedelta(hours=1) and times[0] > datetime.now(UTC)
    previous = as_role(Role.READ, "GET", f"/api/v1/schedules/{name}/previous-runs").json()
    earlier = [datetime.fromisoformat(t) for t in previous["times"]]
    assert len(earlier) == 5 and earlier == sorted(earlier, reverse=True)
    assert earlier[0] < datetime.now(UTC)


def test_a_launched_job_names_its_run_and_the_runs_status(as_role: Call, name: str) -> None:
    every_second = {"trigger": {"type": "TIME", "cronExpression": "* * * * * *"}}
    _create(as_role, name)
    as_role(Role.ADMIN, "POST", f"/api/v1/schedules/{name}/update", json=every_second)
    assert as_role(Role.OPERATE, "POST", f"/api/v1/schedules/{name}/enable").status_code == 200

    def completed() -> list[dict[str, object]]:
        jobs = as_role(Role.READ, "GET", f"/api/v1/schedules/{name}/jobs").json()
        return [job for job in jobs if job["run_status"] == "COMPLETED"]

    job = wait_for(completed, what="a job whose run completed")[0]
    assert job["state"] == "PENDING_LAUNCH" and job["waiting_for"] == []
    run = as_role(Role.READ, "GET", f"/api/v1/runs/{job['run_id']}").json()
    assert run["status"] == "COMPLETED" and run["started_by"] == f"schedule:{name}"
    as_role(Role.OPERATE, "POST", f"/api/v1/schedules/{name}/disable")


def test_the_list_filters_by_status_and_trigger_type_and_pages(as_role: Call) -> None:
    prefix = f"list-{uuid.uuid4().hex[:6]}"
    for n in range(3):
        _create(as_role, f"{prefix}-{n}")
    as_role(Role.OPERATE, "POST", f"/api/v1/schedules/{prefix}-1/enable")

    def names(**params: object) -> list[str]:
        answer = as_role(Role.READ, "GET", "/api/v1/schedules", params=params)
        assert answer.status_code == 200, answer.text
        return [s["name"] for s in answer.json() if s["name"].startswith(prefix)]

    assert names(limit=1000) == [f"{prefix}-0", f"{prefix}-1", f"{prefix}-2"]
    assert names(status="ENABLED", limit=1000) == [f"{prefix}-1"]
    assert names(status="DISABLED", trigger_type="TIME", limit=1000) == [
        f"{prefix}-0",
        f"{prefix}-2",
    ]
    assert names(trigger_type="PARTITION", limit=1000) == []
    assert names(after=f"{prefix}-0", limit=1) == [f"{prefix}-1"]
    bad = as_role(Role.READ, "GET", "/api/v1/schedules", params={"status": "SLEEPING"})
    assert bad.status_code == 400 and "ENABLED or DISABLED" in bad.json()["message"]


def test_a_schedule_page_is_what_its_response_model_says_and_matches_the_get(
    as_role: Call,
) -> None:
    name = f"modelled-{uuid.uuid4().hex[:6]}"
    _create(as_role, name)
    page = as_role(Role.READ, "GET", "/api/v1/schedules", params={"after": name[:-1], "limit": 1})
    assert page.headers["content-type"] == "application/json"
    (listed,) = page.json()
    assert ScheduleOut.model_validate(listed).model_dump(mode="json") == listed
    assert list(listed) == list(ScheduleOut.model_fields)
    assert listed == as_role(Role.READ, "GET", f"/api/v1/schedules/{name}").json()


def test_the_schedules_a_program_triggers_are_listed(as_role: Call, name: str) -> None:
    body = {
        "program": {"programName": "load"},
        "trigger": {
            "type": "PROGRAM_STATUS",
            "programId": {"program": "clean"},
            "programStatuses": ["COMPLETED"],
        },
    }
    created = as_role(Role.ADMIN, "PUT", f"/api/v1/schedules/{name}", json=body)
    assert created.status_code == 201, created.text
    listed = as_role(Role.READ, "GET", "/api/v1/programs/clean/schedules").json()
    assert name in [s["name"] for s in listed]
    assert as_role(Role.READ, "GET", "/api/v1/programs/load/schedules").json() == []


def test_reenable_enables_the_schedules_disabled_in_the_range(as_role: Call, name: str) -> None:
    _create(as_role, name)
    as_role(Role.OPERATE, "POST", f"/api/v1/schedules/{name}/enable")
    start = datetime.now(UTC) - timedelta(seconds=1)
    as_role(Role.OPERATE, "POST", f"/api/v1/schedules/{name}/disable")
    body = {
        "start_time": start.isoformat(),
        "end_time": (datetime.now(UTC) + timedelta(seconds=1)).isoformat(),
    }
    answer = as_role(Role.OPERATE, "POST", "/api/v1/schedules/re-enable", json=body)
    assert answer.status_code == 200, answer.text
    assert name in answer.json()["enabled"]
    got = as_role(Role.READ, "GET", f"/api/v1/schedules/{name}").json()
    assert got["status"] == "ENABLED"
    backwards = {"start_time": body["end_time"], "end_time": body["start_time"]}
    refused = as_role(Role.OPERATE, "POST", "/api/v1/schedules/re-enable", json=backwards)
    assert refused.status_code == 400 and "end_time must be after" in refused.json()["message"]


def test_delete_removes_it_and_unknown_names_are_404s(as_role: Call, name: str) -> None:
    _create(as_role, name)
    assert as_role(Role.ADMIN, "DELETE", f"/api/v1/schedules/{name}").status_code == 204
    for method, path in [
        ("GET", f"/api/v1/schedules/{name}"),
        ("DELETE", f"/api/v1/schedules/{name}"),
        ("POST", f"/api/v1/schedules/{name}/enable"),
        ("POST", f"/api/v1/schedules/{name}/disable"),
        ("GET", f"/api/v1/schedules/{name}/next-runs"),
        ("GET", f"/api/v1/schedules/{name}/jobs"),
    ]:
        role = Role.ADMIN
        answer = as_role(role, method, path)
        assert answer.status_code == 404, (method, path, answer.text)
        assert "no schedule" in answer.json()["message"]


def test_roles_limit_who_changes_schedules(as_role: Call, name: str) -> None:
    refused = as_role(Role.OPERATE, "PUT", f"/api/v1/schedules/{name}", json=_hourly())
    assert refused.status_code == 403 and "needs the admin role" in refused.json()["message"]
    _create(as_role, name)
    read_enable = as_role(Role.READ, "POST", f"/api/v1/schedules/{name}/enable")
    assert read_enable.status_code == 403
    assert as_role(Role.OPERATE, "DELETE", f"/api/v1/schedules/{name}").status_code == 403
    assert as_role(Role.READ, "GET", f"/api/v1/schedules/{name}").status_code == 200


def test_an_operator_enables_a_schedule_in_the_dashboard_and_sees_its_next_run(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str], as_role: Call, name: str
) -> None:
    _create(as_role, name)
    log_in(browser, server, tokens[Role.OPERATE])
    browser.get(f"{server.url}/dashboard/schedules")
    row = f"#schedule-table tr[data-schedule='{name}']"
    wait_text(browser, f"{row} .state", "DISABLED")
    click(browser, f"{row} button[name=enable]")
    assert f"Enable schedule {name}?" in confirm(browser)
    assert f"schedule {name} enabled" in text(browser, "message")
    wait_text(browser, f"{row} .state", "ENABLED")
    shown = wait_text(browser, f"{row} .next time", ":05")
    fire = datetime.fromisoformat(str(shown.get_attribute("datetime")))
    assert fire > datetime.now(UTC) and fire.minute == 5
    shoot(browser, "schedules.png")


def test_a_read_token_sees_schedules_but_may_not_enable_them(
    server: ApiServer, tokens: dict[Role, str], as_role: Call, name: str
) -> None:
    _create(as_role, name)
    with httpx.Client(base_url=server.url) as viewer:
        viewer.post("/dashboard/login", data={"token": tokens[Role.READ]})
        page = viewer.get("/dashboard/schedules", params={"status": "DISABLED"})
        assert name in page.text and "needs the operate role" in page.text
        refused = viewer.post("/dashboard/schedules/act", data={"verb": "enable", "name": name})
        assert refused.status_code == 403 and "enable needs the operate role" in refused.text
    assert as_role(Role.READ, "GET", f"/api/v1/schedules/{name}").json()["status"] == "DISABLED"
