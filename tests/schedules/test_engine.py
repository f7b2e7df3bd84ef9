"""Schedules on a running embedded engine: fires, events and launches travel as engine tasks,
and runs really run."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from pathlib import Path

import pytest

from scheduler.errors import UnknownProgramError
from scheduler.programs.launch import operator_request
from scheduler.programs.model import Run, RunStatus, StarterKind
from scheduler.schedules import Concurrency, Partition, ProgramStatus, Schedule, Time
from scheduler.schedules import RunStatus as TriggerStatus
from scheduler.schedules.errors import ScheduleConflictError, ScheduleNotFoundError
from tests.programs.helpers import OK, PY, command
from tests.programs.test_workflow import wait_for
from tests.schedules.engine import Scheduled, schedules_engine

BRIEF = command("brief", PY, "-c", "import time; time.sleep(0.5)")
ENDED = {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.KILLED}


def scheduled_runs(s: Scheduled, program: str) -> list[Run]:
    return [
        r
        for r in s.runs.list_runs(program=program, limit=100)
        if r.started_by.kind is StarterKind.SCHEDULE
    ]


def test_a_six_field_cron_schedule_runs_its_program_each_second_with_the_logical_time(
    tmp_path: Path,
) -> None:
    with schedules_engine(tmp_path) as s:
        s.schedules.create(Schedule(name="tick", program="ok", trigger=Time(cron="* * * * * *")))
        s.schedules.enable("tick")
        runs = wait_for(lambda: (found := scheduled_runs(s, "ok")) and len(found) >= 2 and found)
        s.schedules.disable("tick")
        for run in runs:
            logical = datetime.fromisoformat(run.arguments["_logical_time"])
            assert logical.microsecond == 0
            assert run.requested_ms == int(logical.timestamp() * 1000)
            assert run.arguments["_schedule.name"] == "tick"
            assert run.arguments["table"] == "clicks"


def test_a_partition_event_and_the_runs_end_chain_two_schedules(tmp_path: Path) -> None:
    with schedules_engine(tmp_path) as s:
        s.schedules.create(
            [
                Schedule(
                    name="daily",
                    program="ok",
                    trigger=Partition(dataset="clicks", num_partitions=2),
                ),
                Schedule(
                    name="report",
                    program="fails",
                    trigger=ProgramStatus(
                        program="ok", statuses=frozenset({TriggerStatus.COMPLETED})
                    ),
                ),
            ]
        )
        s.schedules.enable("daily")
        s.schedules.enable("report")
        assert [r.name for r in s.schedules.triggered_by("ok")] == ["report"]
        s.schedules.store.add_key("program:ok", "daily")  # a stale row: the record decides
        assert [r.name for r in s.schedules.triggered_by("ok")] == ["report"]
        s.publisher.publish_partitions("clicks", ["h1"]).result(10)
        s.publisher.publish_partitions("clicks", ["h2"]).result(10)
        report = wait_for(lambda: scheduled_runs(s, "fails"))
        daily = scheduled_runs(s, "ok")
        assert len(daily) == 1 and daily[0].status is RunStatus.COMPLETED
        assert report[0].arguments["_triggering.run.id"] == daily[0].run_id


def test_the_concurrency_limit_holds_across_two_schedules_and_a_manual_start(
    tmp_path: Path,
) -> None:
    with schedules_engine(tmp_path, (OK, BRIEF)) as s:
        limit = (Concurrency(max_concurrency=1, wait_until_met=True),)
        s.schedules.create(
            [
                Schedule(
                    name=name,
                    program="brief",
                    trigger=Partition(dataset="clicks", num_partitions=1),
                    constraints=limit,
                )
                for name in ("a", "b")
            ]
        )
        s.schedules.enable("a")
        s.schedules.enable("b")
        manual = operator_request("brief", "m1", operator="ann", now_ms=s.schedules.clock())
        s.engine.client.schedule_task(manual.task()).result(10)
        wait_for(lambda: s.runs.active("brief"))
        s.publisher.publish_partitions("clicks", ["h1"]).result(10)
        runs = wait_for(
            lambda: len(done := s.runs.list_runs(program="brief", statuses=ENDED)) == 3 and done
        )
        spans = sorted((r.started_ms or 0, r.ended_ms or 0) for r in runs)
        assert all(end <= next_start for (_, end), (next_start, _) in pairwise(spans))
        assert sorted(r.started_by.name for r in runs) == ["a", "ann", "b"]


def test_lifecycle_errors_name_the_schedule_and_change_nothing(tmp_path: Path) -> None:
    with schedules_engine(tmp_path) as s:
        hourly = Schedule(name="hourly", program="ok", trigger=Time(cron="5 * * * *"))
        s.schedules.create(hourly)
        with pytest.raises(ScheduleConflictError, match="hourly"):
            s.schedules.create([Schedule(name="new", program="ok", trigger=hourly.trigger), hourly])
        with pytest.raises(ScheduleConflictError, match="disabled already"):
            s.schedules.disable("hourly")
        s.schedules.enable("hourly")
        with pytest.raises(ScheduleConflictError, match="enabled already"):
            s.schedules.enable("hourly")
        with pytest.raises(ScheduleNotFoundError, match="nope"):
            s.schedules.delete(["hourly", "nope"])
        with pytest.raises(UnknownProgramError):
            s.schedules.create(Schedule(name="x", program="missing", trigger=hourly.trigger))
        assert [r.name for r in s.schedules.list_schedules()] == ["hourly"]
        updated = s.schedules.update("hourly", {"description": "cleans"})
        assert updated.trigger == hourly.trigger
        record = s.schedules.get("hourly")
        assert record.schedule.description == "cleans" and record.enabled
        s.schedules.delete(["hourly"])
        with pytest.raises(ScheduleNotFoundError):
            s.schedules.get("hourly")
