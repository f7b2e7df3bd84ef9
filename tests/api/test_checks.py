"""Checking a schedule or a batch configuration through the API: what their engines will accept,
or every problem with its path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx

from scheduler.api.auth import Role

Call = Callable[..., httpx.Response]
SEED = Path(__file__).resolve().parents[1] / "batch" / "seed_example.json"


def test_the_seeds_batch_configuration_is_valid(as_role: Call) -> None:
    body = json.loads(SEED.read_text())
    answer = as_role(Role.READ, "POST", "/api/v1/checks/batch-configuration", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["jobs"] == [job["name"] for job in body["jobs"]]


def test_a_broken_batch_configuration_lists_every_problem_by_path(as_role: Call) -> None:
    body = json.loads(SEED.read_text())
    body["max_parallelism"] = -1
    body["jobs"][0]["increment"] = "1 fortnight"
    answer = as_role(Role.READ, "POST", "/api/v1/checks/batch-configuration", json=body)
    assert answer.status_code == 400
    fields = {problem["field"] for problem in answer.json()["fields"]}
    assert {"body.max_parallelism", "body.jobs[0].increment"} <= fields


def test_a_schedule_is_answered_as_the_engine_reads_it(as_role: Call) -> None:
    body = {
        "name": "nightly",
        "program": "p",
        "trigger": {"type": "TIME", "cronExpression": "0 2 * * *"},
    }
    answer = as_role(Role.READ, "POST", "/api/v1/checks/schedule", json=body)
    assert answer.status_code == 200, answer.text
    schedule = answer.json()["schedule"]
    assert schedule["timeZone"] == "UTC" and schedule["program"] == {"programName": "p"}


def test_a_wrong_cron_is_a_400_that_says_what_to_write(as_role: Call) -> None:
    body = {"name": "nightly", "program": "p", "trigger": {"type": "TIME", "cronExpression": "0 2"}}
    answer = as_role(Role.READ, "POST", "/api/v1/checks/schedule", json=body)
    assert answer.status_code == 400
    assert "trigger.cronExpression" in answer.json()["message"]
    assert "write five fields" in answer.json()["message"]
    # Each wrong field also by its place in the body, for a tool to point at.
    (field,) = answer.json()["fields"]
    assert field["field"] == "body.trigger.cronExpression"
    assert "write five fields" in field["problem"]


def test_a_check_needs_a_token(client: httpx.Client) -> None:
    assert client.post("/api/v1/checks/schedule", json={}).status_code == 401
