"""A schedule's queue, deterministically: the `schedules` executor with a stepped clock (see
harness.py). Times are 2026-01-01 UTC."""

from __future__ import annotations

import pytest

from scheduler.model import from_epoch_ms
from scheduler.programs.model import RunStatus as ProgramRunStatus
from scheduler.programs.model import run_id_for
from scheduler.schedules import (
    And,
    CatchUp,
    Concurrency,
    JobState,
    Or,
    Partition,
    ProgramStatus,
    RunStatus,
    Schedule,
    Time,
    TimeRange,
)
from scheduler.schedules.tasks import queue
from tests.schedules.harness import T0, Harness

MIN = 60_000
HOUR = 60 * MIN


def hourly(**kw: object) -> Schedule:
    return Schedule(name="hourly", program="clean", trigger=Time(cron="5 * * * *"), **kw)


def on_data(n: int = 3, **kw: object) -> Schedule:
    return Schedule(
        name="daily", program="rollup", trigger=Partition(dataset="clicks", num_partitions=n), **kw
    )


def landed(count: int, event_id: str, dataset: str = "clicks") -> dict:
    return {"kind": "PARTITION", "dataset": dataset, "count": count, "event_id": event_id}


def ended(run: str, status: str = "COMPLETED", program: str = "rollup") -> dict:
    return {"kind": "PROGRAM_STATUS", "program": program, "run_id": run, "status": status}


def test_a_cron_schedule_launches_at_each_fire_with_its_logical_time(harness: Harness) -> None:
    harness.create_enabled(hourly())
    harness.advance_to(T0 + 3 * HOUR)
    launches = harness.client.launches
    fires = [T0 + 5 * MIN, T0 + HOUR + 5 * MIN, T0 + 2 * HOUR + 5 * MIN]
    assert [t.scheduled_ms for t in launches] == fires
    assert [t.data["system"]["logical_time"] for t in launches] == [
        from_epoch_ms(f).isoformat() for f in fires
    ]
    assert len({t.data["request_key"] for t in launches}) == 3
    assert harness.record("hourly").next_fires == {"0": T0 + 3 * HOUR + 5 * MIN}


def test_a_created_schedule_is_disabled_and_does_not_fire(harness: Harness) -> None:
    harness.change("hourly", "create", hourly())
    harness.advance_to(T0 + 3 * HOUR)
    assert not harness.record("hourly").enabled
    assert harness.client.launches == []


@pytest.mark.parametrize(
    ("policy", "late_fires"),
    [(CatchUp.SKIP, []), (CatchUp.ONCE, [4]), (CatchUp.ALL, [0, 1, 2, 3, 4])],
)
def test_fires_missed_while_no_worker_ran_follow_the_catch_up_policy(
    harness: Harness, policy: CatchUp, late_fires: list[int]
) -> None:
    harness.create_enabled(hourly(catch_up=policy))
    harness.clock.now = T0 + 4 * HOUR + 30 * MIN  # the fleet was down since midnight
    harness.run_due()
    logical = [t.data["system"]["logical_time"] for t in harness.client.launches]
    assert logical == [from_epoch_ms(T0 + h * HOUR + 5 * MIN).isoformat() for h in late_fires]
    assert harness.record("hourly").next_fires == {"0": T0 + 5 * HOUR + 5 * MIN}


def test_a_partition_trigger_counts_over_each_job_generation(harness: Harness) -> None:
    harness.create_enabled(on_data(3))
    harness.deliver("daily", landed(2, "a"))
    assert harness.client.launches == []
    harness.deliver("daily", landed(2, "b"))
    harness.deliver("daily", landed(2, "b"))  # the same event delivered twice counts once
    harness.deliver("daily", landed(1, "c"))
    assert len(harness.client.launches) == 1
    harness.deliver("daily", landed(2, "d"))
    launches = harness.client.launches
    assert len(launches) == 2
    assert [t.data["request_key"] for t in launches] == [
        f"schedule:daily:{harness.record('daily').revision}:{g}" for g in (0, 1)
    ]
    assert "triggering.partitions" in launches[1].data["system"]


def test_a_composite_trigger_launches_once_when_it_is_satisfied(harness: Harness) -> None:
    both = And(
        triggers=(
            Partition(dataset="clicks", num_partitions=1),
            ProgramStatus(program="rollup", statuses=frozenset({RunStatus.COMPLETED})),
        )
    )
    either = Or(triggers=(Partition(dataset="clicks", num_partitions=1), both))
    harness.create_enabled(Schedule(name="report", program="report", trigger=both))
    harness.create_enabled(Schedule(name="any", program="report", trigger=either))
    harness.deliver("report", landed(1, "a"))
    assert harness.client.launches == []
    harness.deliver("report", ended("r1"))
    harness.deliver("any", landed(1, "a"))  # satisfies both branches of the OR
    requests = [t.data["request_key"] for t in harness.client.launches]
    assert [r.split(":")[1] for r in requests] == ["report", "any"]
    assert harness.client.launches[0].data["system"]["triggering.run.id"] == "r1"


def test_a_time_window_waits_then_launches_at_the_window_start(harness: Harness) -> None:
    night = TimeRange(start="22:00", end="06:00")
    harness.create_enabled(on_data(1, constraints=(night,)))
    harness.clock.now = T0 + 12 * HOUR
    harness.deliver("daily", landed(1, "a"))
    assert harness.client.launches == []
    assert harness.store.jobs("daily")[-1].state is JobState.PENDING_CONSTRAINT
    checks = [k for k in harness.client.pending if k.uniqueness_key.startswith("check:")]
    assert [k.scheduled_ms for k in checks] == [T0 + 22 * HOUR]
    harness.advance_to(T0 + 22 * HOUR - 1)
    assert harness.client.launches == []
    harness.advance_to(T0 + 22 * HOUR)
    assert [t.scheduled_ms for t in harness.client.launches] == [T0 + 22 * HOUR]


def test_a_concurrency_wait_launches_when_the_blocking_run_ends(harness: Harness) -> None:
    harness.create_enabled(
        on_data(1, constraints=(Concurrency(max_concurrency=1, wait_until_met=True),))
    )
    blocking = harness.start_run("rollup", "manual")
    harness.deliver("daily", landed(1, "a"))
    assert harness.client.launches == []
    assert harness.store.names_for_key("run-end:rollup") == ["daily"]
    harness.runs.transition(
        blocking.with_status(ProgramRunStatus.COMPLETED, ended_ms=harness.clock.now),
        {ProgramRunStatus.RUNNING},
    )
    harness.clock.now += 1000
    harness.deliver("daily", None, run_ended=True)  # type: ignore[arg-type]
    assert len(harness.client.launches) == 1
    assert harness.client.launches[0].data["concurrency"] == 1
    assert harness.store.names_for_key("run-end:rollup") == []


def test_a_refused_launch_waits_and_retries_with_the_same_request(harness: Harness) -> None:
    harness.create_enabled(
        on_data(1, constraints=(Concurrency(max_concurrency=1, wait_until_met=True),))
    )
    harness.deliver("daily", landed(1, "a"))
    first = harness.client.launches[0]
    refusal = first.data | {"op": "launch-refused", "active": 1, "limit": 1}
    from scheduler.model import Task

    harness.client.schedule_task(
        Task(queue("daily"), first.scheduled_time, "launch-refused:x", refusal)
    )
    harness.run_due()
    assert harness.store.jobs("daily")[-1].state is JobState.PENDING_CONSTRAINT
    harness.clock.now += 5000
    harness.deliver("daily", None, run_ended=True)  # type: ignore[arg-type]
    second = harness.client.launches[1]
    assert second.data["request_key"] == first.data["request_key"]
    assert second.key != first.key


def test_a_concurrency_constraint_that_does_not_wait_aborts(harness: Harness) -> None:
    harness.create_enabled(on_data(1, constraints=(Concurrency(max_concurrency=1),)))
    harness.start_run("rollup", "manual")
    harness.deliver("daily", landed(1, "a"))
    assert harness.client.launches == []
    assert harness.store.jobs("daily")[-1].state is JobState.ABORTED


def test_events_for_a_disabled_schedule_are_dropped(harness: Harness) -> None:
    harness.create_enabled(on_data(2))
    harness.deliver("daily", landed(1, "a"))
    harness.change("daily", "disable")
    assert [j.state for j in harness.store.jobs("daily")] == [JobState.OBSOLETE]
    harness.deliver("daily", landed(5, "b"))
    harness.change("daily", "enable")
    harness.deliver("daily", landed(1, "c"))
    assert harness.client.launches == []  # the count started over: 1 of 2


def test_an_update_makes_the_pending_job_obsolete_and_old_tasks_no_ops(harness: Harness) -> None:
    harness.create_enabled(on_data(2, timeout_millis=HOUR))
    harness.deliver("daily", landed(1, "a"))
    old = harness.record("daily").revision
    harness.clock.now += 1
    harness.change("daily", "update", on_data(3, timeout_millis=HOUR))
    record = harness.record("daily")
    assert record.revision > old and record.enabled
    assert harness.store.jobs("daily")[0].state is JobState.OBSOLETE
    harness.advance_to(T0 + 2 * HOUR)  # the old job's timeout task runs: a no-op
    assert harness.store.jobs("daily")[0].reason == "the schedule was updated"
    harness.deliver("daily", landed(2, "b"))
    assert harness.client.launches == []  # 2 of the new 3
    harness.deliver("daily", landed(1, "c"))
    assert len(harness.client.launches) == 1


def test_events_after_a_delete_do_nothing_and_a_recreated_schedule_starts_over(
    harness: Harness,
) -> None:
    harness.create_enabled(on_data(2))
    harness.deliver("daily", landed(1, "a"))
    old = harness.record("daily").revision
    harness.clock.now += 1
    harness.change("daily", "delete")
    assert harness.store.get("daily") is None
    harness.deliver("daily", landed(5, "b"))
    harness.create_enabled(on_data(2))
    assert harness.record("daily").revision > old
    harness.deliver("daily", landed(1, "c"))
    assert harness.client.launches == []


def test_a_job_times_out_from_its_first_event(harness: Harness) -> None:
    harness.create_enabled(on_data(2, timeout_millis=HOUR))
    harness.deliver("daily", landed(1, "a"))
    harness.advance_to(T0 + HOUR)
    assert harness.store.jobs("daily")[-1].state is JobState.TIMED_OUT


def test_a_fire_run_again_after_a_crash_launches_the_same_run(harness: Harness) -> None:
    # A constraint keeps the schedule on its own fire task (test_fires.py crashes a tick).
    harness.create_enabled(hourly(constraints=(Concurrency(max_concurrency=5),)))
    fire = next(t for t in harness.client.pending.values() if t.data["op"] == "fire")
    harness.clock.now = fire.scheduled_ms
    put = harness.store.put
    harness.store.put = lambda record: (_ for _ in ()).throw(OSError("killed"))  # type: ignore[method-assign]
    with pytest.raises(OSError):
        harness.executor.handle(fire)  # launched, then died before writing its state
    harness.store.put = put  # type: ignore[method-assign]
    harness.executor.handle(fire)  # the engine runs the task again
    harness.executor.handle(fire)  # and once more, after it completed
    requests = {(t.data["program"], t.data["request_key"]) for t in harness.client.launches}
    assert len(requests) == 1
    assert {t.key for t in harness.client.launches} == {harness.client.launches[0].key}
    program, key = requests.pop()
    assert run_id_for(program, key)


def test_a_delay_launches_exactly_its_millis_after_the_first_event(harness: Harness) -> None:
    from scheduler.schedules import Delay

    harness.create_enabled(on_data(1, constraints=(Delay(millis=90_000),)))
    harness.clock.now = T0 + HOUR
    harness.deliver("daily", landed(1, "a"))
    harness.advance_to(T0 + HOUR + 89_999)
    assert harness.client.launches == []
    harness.advance_to(T0 + 2 * HOUR)
    assert [t.scheduled_ms for t in harness.client.launches] == [T0 + HOUR + 90_000]


def test_a_cron_fire_in_a_skipped_dst_hour_fires_once_at_the_shift(harness: Harness) -> None:
    from datetime import UTC, datetime

    march_28 = int(datetime(2026, 3, 28, 12, tzinfo=UTC).timestamp() * 1000)
    harness.clock.now = march_28
    harness.create_enabled(
        Schedule(
            name="berlin",
            program="clean",
            trigger=Time(cron="30 2 * * *"),
            time_zone="Europe/Berlin",
        )
    )
    harness.advance_to(march_28 + 48 * HOUR)
    logical = [t.data["system"]["logical_time"] for t in harness.client.launches]
    # 02:30 does not exist on 29 March in Berlin: it fires once, at 03:00 CEST (01:00 UTC).
    assert logical == ["2026-03-29T01:00:00+00:00", "2026-03-30T00:30:00+00:00"]


def test_a_launch_refused_after_an_update_leaves_the_old_job_obsolete(harness: Harness) -> None:
    from scheduler.model import Task

    waits = (Concurrency(max_concurrency=1, wait_until_met=True),)
    harness.create_enabled(on_data(1, constraints=waits))
    harness.deliver("daily", landed(1, "a"))
    first = harness.client.launches[0]
    harness.clock.now += 1
    harness.change("daily", "update", on_data(2, constraints=waits))
    refusal = first.data | {"op": "launch-refused", "active": 1, "limit": 1}
    harness.client.schedule_task(
        Task(queue("daily"), first.scheduled_time, "launch-refused:x", refusal)
    )
    harness.run_due()
    assert [j.state for j in harness.store.jobs("daily")] == [JobState.OBSOLETE]
    assert harness.store.names_for_key("run-end:rollup") == []


def test_a_last_run_constraint_waits_until_its_millis_after_the_last_completed_run(
    harness: Harness,
) -> None:
    from scheduler.schedules import LastRun

    harness.create_enabled(on_data(1, constraints=(LastRun(millis=HOUR, wait_until_met=True),)))
    run = harness.start_run("rollup", "earlier")
    harness.runs.transition(
        run.with_status(ProgramRunStatus.COMPLETED, ended_ms=T0 + 10 * MIN),
        {ProgramRunStatus.RUNNING},
    )
    harness.clock.now = T0 + 20 * MIN
    harness.deliver("daily", landed(1, "a"))
    harness.advance_to(T0 + 70 * MIN - 1)
    assert harness.client.launches == []
    harness.advance_to(T0 + 2 * HOUR)
    assert [t.scheduled_ms for t in harness.client.launches] == [T0 + 70 * MIN]


def _jobs_gauge() -> dict[str, float]:
    from scheduler import metrics

    return {str(s): metrics.SCHEDULE_JOBS.labels(str(s))._value.get() for s in JobState}


def test_the_jobs_per_state_gauge_follows_a_job_in_and_out_of_each_state(
    harness: Harness,
) -> None:
    before = _jobs_gauge()

    def moved() -> dict[str, float]:
        now = _jobs_gauge()
        return {state: now[state] - before[state] for state in now if now[state] != before[state]}

    harness.create_enabled(on_data(2))
    harness.deliver("daily", landed(1, "a"))
    assert moved() == {"PENDING_TRIGGER": 1}
    harness.deliver("daily", landed(1, "b"))
    assert moved() == {"PENDING_LAUNCH": 1}
    harness.deliver("daily", landed(1, "c"))
    assert moved() == {"PENDING_LAUNCH": 1, "PENDING_TRIGGER": 1}
    harness.change("daily", "disable")
    assert moved() == {"PENDING_LAUNCH": 1, "OBSOLETE": 1}
    harness.change("daily", "delete")
    assert moved() == {}


@pytest.mark.parametrize(
    ("policy", "seconds"),
    [(CatchUp.ALL, [10, 20, 30]), (CatchUp.ONCE, [30]), (CatchUp.SKIP, [10, 20, 30])],
)
def test_an_on_time_fire_run_after_the_next_was_due_runs_what_the_catch_up_policy_says(
    harness: Harness, policy: CatchUp, seconds: list[int]
) -> None:
    every_ten = Schedule(
        name="often", program="clean", trigger=Time(cron="*/10 * * * * *"), catch_up=policy
    )
    harness.create_enabled(every_ten)
    harness.clock.now = T0 + 35_000  # the fire at 10 s runs 25 s late, within LATE_MS
    harness.run_due()
    logical = [t.data["system"]["logical_time"] for t in harness.client.launches]
    assert logical == [from_epoch_ms(T0 + s * 1000).isoformat() for s in seconds]
    assert harness.record("often").next_fires == {"0": T0 + 40_000}
