"""Schedules end to end on Kafka and Cassandra: a worker killed in the middle of a cron fire
still gives exactly one run of that fire."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]


@pytest.fixture
def with_programs(distributed, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    ran = tmp_path / "ran.txt"
    path = tmp_path / "programs.toml"
    path.write_text(
        f"""
[programs.hello]
kind = "command"
argv = ["{sys.executable}", "-c", "open({str(ran)!r}, 'a').write('{{{{_logical_time}}}}\\\\n')"]
"""
    )
    monkeypatch.setenv("SCHEDULER_PROGRAMS_FILE", str(path))
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")
    return {**distributed, "ran": ran}


def crashing_worker(mode: str, marker: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.schedules.crash_child", mode, str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("mode", ["enqueued", "written"])
def test_a_worker_killed_mid_fire_gives_exactly_one_run_of_that_fire(
    with_programs, run, worker, tmp_path, mode
) -> None:
    marker = tmp_path / "crashed"
    schedules = tmp_path / "schedules.json"
    schedules.write_text(
        json.dumps(
            {
                "name": "minutely",
                "program": {"programName": "hello"},
                "trigger": {"type": "TIME", "cronExpression": "* * * * * *"},
                "catchUp": "SKIP",
            }
        )
    )
    child = crashing_worker(mode, marker)
    wait_for(lambda: run("schedules", "list").exit_code == 0, timeout=120)  # its tables exist
    created = run("schedules", "create", str(schedules), "--wait", "120")
    assert created.exit_code == 0, created.output
    assert run("schedules", "enable", "minutely", "--wait", "120").exit_code == 0
    assert child.wait(timeout=180) == 9, child.stderr.read() if child.stderr else ""
    jobs = json.loads(run("schedules", "jobs", "minutely", "--json").output)
    first = jobs[0]["events"][0]["logical_time_ms"] if jobs else None

    worker()

    def runs() -> list[dict]:
        listed = run("runs", "list", "--json", "--program", "hello", "--limit", "1000")
        return json.loads(listed.output) if listed.exit_code == 0 else []

    wait_for(lambda: len([r for r in runs() if r["status"] == "COMPLETED"]) >= 2, timeout=180)
    assert run("schedules", "disable", "minutely", "--wait", "60").exit_code == 0
    found = runs()
    keys = [r["request_key"] for r in found]
    assert len(keys) == len(set(keys))
    logical = [r["arguments"]["_logical_time"] for r in found]
    assert len(logical) == len(set(logical))  # no fire made two runs
    if first is not None:  # the fire the worker died in ran, once
        from scheduler.model import from_epoch_ms

        assert logical.count(from_epoch_ms(first).isoformat()) == 1
