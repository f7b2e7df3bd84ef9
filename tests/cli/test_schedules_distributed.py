"""Schedules end to end on Kafka and Cassandra: a worker killed in the middle of a cron fire
still gives exactly one run of that fire."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.helpers import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]

FIRST_FIRE_LEAD_S = 15
"""From the worker answering to the tick test's first fire: time to create and enable the
schedule and still be ENROLL_MARGIN_MS (5 s) before it. Where that takes longer (a loaded
machine), the first fire gets a fire task of its own and the tick half a minute later is the one
the worker dies in: slower, never wrong (two runs, of two fires, are awaited either way)."""
FIRE_GAP_S = 30
"""Between the tick test's fires. The fire after the one the worker dies in must come after its
replacement has the partition (some 10 s after the crash: the dead member's 10 s session ends),
so that the tick re-executed there finds its next fire still ahead and fires through the tick
again, rather than handing its fire to a fire task as a late one."""


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


def events_read(settings: dict[str, str]) -> int:
    """How many events the workers' events group has committed."""
    from scheduler.logs.kafka import KafkaTaskLog

    log = KafkaTaskLog(
        bootstrap_servers=settings["SCHEDULER_KAFKA_BOOTSTRAP"],
        topic=settings["SCHEDULER_TOPIC"] + "-events",
    )
    try:
        lags = log.describe_group(settings["SCHEDULER_GROUP_ID"] + "-events")
        return sum(lag.committed or 0 for lag in lags)
    finally:
        log.close()


def idle(run) -> bool:  # type: ignore[no-untyped-def]
    """No task of the schedule's queue is pending any more."""
    states = ("--state", "pending", "--state", "running", "--state", "retrying")
    listed = run("tasks", "list", "--json", "--ordering-id", "schedule:daily", *states)
    return listed.exit_code == 0 and json.loads(listed.output) == []


def every_gap_from(first_s: float) -> str:
    """A six-field cron that fires every `FIRE_GAP_S` seconds, first at the second `first_s`
    (epoch) falls in: fires far enough apart for the tick path, without waiting up to a minute
    for the first one or a minute for the next."""
    first = int(first_s) % 60
    seconds = sorted({(first + gap) % 60 for gap in range(0, 60, FIRE_GAP_S)})
    return f"{','.join(map(str, seconds))} * * * * *"


@pytest.mark.parametrize("mode", ["enqueued", "written", "tick"])
def test_a_worker_killed_mid_fire_gives_exactly_one_run_of_that_fire(
    with_programs, run, worker, tmp_path, mode
) -> None:
    marker = tmp_path / "crashed"
    # The schema and topic first, as a deployment makes them: a worker and a command
    # creating the same tables at once can leave one of them holding a table id Cassandra
    # dropped ("Unknown CF"), which failed this test once in a full run.
    applied = run("schema", "apply")
    assert applied.exit_code == 0, applied.output
    made = run("topic", "create")
    assert made.exit_code == 0, made.output
    child = crashing_worker(mode, marker)
    wait_for(lambda: run("schedules", "list").exit_code == 0, timeout=120)
    schedules = tmp_path / "schedules.json"
    schedules.write_text(
        json.dumps(
            {
                "name": "minutely",
                "program": {"programName": "hello"},
                # A lone cron fires through its instant's tick if its fire is at least
                # ENROLL_MARGIN_MS after the enable (a nearer one gets a fire task of its own:
                # then the tick is the next fire, FIRE_GAP_S later).
                "trigger": {
                    "type": "TIME",
                    "cronExpression": every_gap_from(time.time() + FIRST_FIRE_LEAD_S)
                    if mode == "tick"
                    else "* * * * * *",
                },
                "catchUp": "SKIP",
            }
        )
    )
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


def test_partitions_published_on_kafka_launch_a_partition_schedule_once(
    with_programs, run, worker, tmp_path
) -> None:
    worker()
    wait_for(lambda: run("schedules", "list").exit_code == 0, timeout=120)
    schedules = tmp_path / "schedules.json"
    schedules.write_text(
        json.dumps(
            {
                "name": "daily",
                "program": "hello",
                "trigger": {"type": "PARTITION", "dataset": "clicks", "numPartitions": 3},
            }
        )
    )
    assert run("schedules", "create", str(schedules), "--wait", "120").exit_code == 0
    published = run("events", "publish-partition", "clicks", "h1", "h2")
    assert published.exit_code == 0, published.output
    wait_for(lambda: events_read(with_programs) == 1, timeout=120)
    wait_for(lambda: idle(run), timeout=120)  # the disabled schedule dropped them
    assert run("schedules", "enable", "daily", "--wait", "120").exit_code == 0
    assert run("events", "publish-partition", "clicks", "h3", "h4").exit_code == 0
    wait_for(lambda: json.loads(run("schedules", "jobs", "daily", "--json").output), timeout=120)
    assert run("events", "publish-partition", "clicks", "h5").exit_code == 0

    def runs() -> list[dict]:
        listed = run("runs", "list", "--json", "--program", "hello")
        return json.loads(listed.output) if listed.exit_code == 0 else []

    done = wait_for(lambda: [r for r in runs() if r["status"] == "COMPLETED"], timeout=180)
    assert [r["started_by"] for r in done] == ["schedule:daily"]
    assert json.loads(done[0]["arguments"]["_triggering.partitions"]) == [
        {"dataset": "clicks", "count": 3}
    ]
    listed = json.loads(run("schedules", "list", "--triggered-by", "nope", "--json").output)
    assert listed == []
