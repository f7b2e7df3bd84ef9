"""The fleet endpoints: the worker group as `scheduler group status` computes it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from scheduler.api.auth import Role
from tests.api.conftest import wait_for
from tests.cli.conftest import SCRIPT

Call = Callable[..., httpx.Response]


def test_the_fleet_names_the_worker_and_the_partitions_it_owns(as_role: Call) -> None:
    answer = as_role(Role.READ, "GET", "/api/v1/fleet")
    assert answer.status_code == 200, answer.text
    fleet = answer.json()
    assert fleet["group"] == "scheduler-workers" and fleet["topic"] == "scheduler-tasks"
    assert fleet["workers"] == [{"name": "api-test-worker", "partitions": [0, 1, 2, 3]}]
    assert [p["partition"] for p in fleet["partitions"]] == [0, 1, 2, 3]
    assert {p["owner"] for p in fleet["partitions"]} == {"api-test-worker"}
    workers = as_role(Role.READ, "GET", "/api/v1/fleet/workers").json()
    assert workers == fleet["workers"]


def test_future_work_shows_in_the_fleet_as_committed_not_overdue(as_role: Call) -> None:
    due = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    tasks = [
        {"ordering_id": f"fleet-{n}", "scheduled_time": due, "uniqueness_key": "f"}
        for n in range(8)
    ]
    before = as_role(Role.READ, "GET", "/api/v1/fleet").json()
    as_role(Role.OPERATE, "POST", "/api/v1/tasks/batch", json={"tasks": tasks})

    def committed_all() -> dict[str, object] | None:
        fleet = as_role(Role.READ, "GET", "/api/v1/fleet").json()
        ends = sum(p["end"] for p in fleet["partitions"]) - sum(
            p["end"] for p in before["partitions"]
        )
        return fleet if ends == 8 and fleet["lag"] == 0 else None

    fleet = wait_for(committed_all, what="the worker to commit the eight tasks")
    assert fleet["overdue"] == before["overdue"]


def test_the_api_and_group_status_agree(as_role: Call, deployment: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
    env.update(SCHEDULER_DATA_DIR=str(deployment), SCHEDULER_PARTITIONS="4")
    printed = subprocess.run(
        [SCRIPT, "group", "status", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    partitions = as_role(Role.READ, "GET", "/api/v1/fleet/partitions").json()
    fields = ("partition", "owner", "committed", "end", "lag")
    assert [{f: p[f] for f in fields} for p in json.loads(printed.stdout)] == [
        {f: p[f] for f in fields} for p in partitions
    ]
