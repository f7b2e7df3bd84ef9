"""The pending job as a pure state machine: events, trigger satisfaction, constraints, timeout,
and the seeds' test scenarios that concern it."""

from __future__ import annotations

import json

import pytest

from scheduler.schedules import (
    And,
    CheckConstraints,
    Concurrency,
    ConstraintContext,
    Delay,
    Effect,
    Event,
    EventIgnored,
    FinishedRun,
    Job,
    JobEnded,
    JobState,
    JobStateError,
    LastRun,
    Launch,
    Or,
    Partition,
    PartitionsAdded,
    ProgramStatus,
    RecheckOnRunEnd,
    RunEnded,
    RunStatus,
    Schedule,
    Time,
    TimeFired,
    TimeoutAt,
    TimeRange,
    add_event,
    check_constraints,
    discard,
    expire,
    new_job,
    recheck,
    time_fired,
)
from scheduler.schedules import job as jobs

T0 = 1_780_000_000_000  # 2026-05-28T20:26:40Z
SECOND = 1000
MINUTE = 60 * SECOND
NO_RUNS = ConstraintContext()


def _schedule(trigger: object, *constraints: object, **fields: object) -> Schedule:
    return Schedule.model_validate(
        {"name": "s", "program": "p", "trigger": trigger, "constraints": constraints, **fields}
    )


def _partitions(count: int, dataset: str = "d") -> PartitionsAdded:
    return PartitionsAdded(dataset=dataset, count=count)


def _feed(job: Job, *timed: tuple[int, Event]) -> tuple[Job, list[Effect]]:
    """Add each (now, event) in turn to the latest job; all the effects, in order."""
    effects: list[Effect] = []
    for now, event in timed:
        job, produced = add_event(job, event, now)
        effects.extend(produced)
    return job, effects


def _launches(effects: list[Effect]) -> list[Launch]:
    return [effect for effect in effects if isinstance(effect, Launch)]


def test_partitions_are_counted_over_the_jobs_events_until_enough_landed() -> None:
    job = new_job(_schedule(Partition(dataset="d", num_partitions=5)), revision=1)

    job, effects = _feed(job, (T0, _partitions(2)), (T0 + 1, _partitions(2)))
    assert job.state is JobState.PENDING_TRIGGER
    assert _launches(effects) == []

    job, effects = _feed(job, (T0 + 2, _partitions(1)))
    assert job.state is JobState.PENDING_LAUNCH
    assert [launch.job_key for launch in _launches(effects)] == ["schedule:s:1:0"]


def test_a_launched_job_names_the_run_its_launch_makes_and_an_open_one_none() -> None:
    from scheduler.programs.model import run_id_for

    job = new_job(_schedule(Partition(dataset="d", num_partitions=1)), revision=1)
    assert job.run_id is None
    job, effects = _feed(job, (T0, _partitions(1)))
    (launch,) = _launches(effects)
    assert job.state is JobState.PENDING_LAUNCH
    assert job.run_id == run_id_for("p", launch.job_key)  # the launch's request key is the job's


def test_partition_counts_start_again_in_the_next_job_generation() -> None:
    job = new_job(_schedule(Partition(dataset="d", num_partitions=5)), revision=1)

    # 7 at once satisfy the first job; the 2 beyond its 5 are not carried over.
    job, first = _feed(job, (T0, _partitions(7)))
    job, second = _feed(job, (T0 + 1, _partitions(3)))
    assert (job.generation, job.state) == (1, JobState.PENDING_TRIGGER)

    job, third = _feed(job, (T0 + 2, _partitions(2)))
    assert [launch.job_key for launch in _launches(first + second + third)] == [
        "schedule:s:1:0",
        "schedule:s:1:1",
    ]


def test_events_no_trigger_counts_change_nothing() -> None:
    schedule = _schedule(ProgramStatus(program="etl", statuses=frozenset({RunStatus.COMPLETED})))
    job = new_job(schedule, revision=1)

    for event in (
        _partitions(1),
        RunEnded(program="etl", run_id="r1", status=RunStatus.FAILED),
        RunEnded(program="other", run_id="r2", status=RunStatus.COMPLETED),
    ):
        unchanged, effects = add_event(job, event, T0)
        assert unchanged == job
        assert len(effects) == 1 and isinstance(effects[0], EventIgnored)


def test_the_timeout_is_counted_from_the_jobs_first_event() -> None:
    job = new_job(_schedule(Partition(dataset="d", num_partitions=3), timeoutMillis=MINUTE), 1)

    job, effects = _feed(job, (T0, _partitions(1)), (T0 + 30 * SECOND, _partitions(1)))

    assert [e for e in effects if isinstance(e, TimeoutAt)] == [TimeoutAt(job.key, T0 + MINUTE)]
    assert expire(job, T0 + MINUTE - 1) == (job, ())
    ended, effects_at_deadline = expire(job, T0 + MINUTE)
    assert ended.state is JobState.TIMED_OUT
    assert effects_at_deadline == (JobEnded(job.key, JobState.TIMED_OUT, ended.reason or ""),)


def test_an_event_after_the_deadline_ends_the_old_job_and_starts_a_fresh_one() -> None:
    job = new_job(_schedule(Partition(dataset="d", num_partitions=2), timeoutMillis=MINUTE), 1)
    job, _ = _feed(job, (T0, _partitions(1)))

    job, effects = add_event(job, _partitions(1), T0 + MINUTE)

    assert isinstance(effects[0], JobEnded) and effects[0].state is JobState.TIMED_OUT
    assert effects[1] == TimeoutAt("schedule:s:1:1", T0 + 2 * MINUTE)
    assert (job.generation, job.state, job.first_event_ms) == (
        1,
        JobState.PENDING_TRIGGER,
        T0 + MINUTE,
    )


COMPOSITES = [
    # AND: every part must be satisfied by the same job's events, in any order.
    (
        And(
            triggers=(
                Partition(dataset="d", num_partitions=2),
                ProgramStatus(program="etl", statuses=frozenset({RunStatus.COMPLETED})),
            )
        ),
        [
            _partitions(1),
            RunEnded(program="etl", run_id="r1", status=RunStatus.COMPLETED),
            _partitions(1),
            _partitions(1),
        ],
        [2],
    ),
    # OR: the first part satisfied launches; a later event starts the next job.
    (
        Or(
            triggers=(
                Partition(dataset="d", num_partitions=2),
                ProgramStatus(program="etl", statuses=frozenset({RunStatus.COMPLETED})),
            )
        ),
        [
            _partitions(1),
            _partitions(1),
            RunEnded(program="etl", run_id="r1", status=RunStatus.COMPLETED),
            _partitions(1),
        ],
        [1, 2],
    ),
    # Nested: (A and B) or C.
    (
        Or(
            triggers=(
                And(
                    triggers=(
                        Partition(dataset="a", num_partitions=1),
                        Partition(dataset="b", num_partitions=1),
                    )
                ),
                ProgramStatus(program="etl", statuses=frozenset({RunStatus.KILLED})),
            )
        ),
        [_partitions(1, "a"), _partitions(1, "a"), _partitions(1, "b"), _partitions(1, "b")],
        [2],
    ),
]


@pytest.mark.parametrize(("trigger", "events", "launched_after"), COMPOSITES)
def test_a_composite_trigger_is_satisfied_exactly_once_per_job(
    trigger: object, events: list[Event], launched_after: list[int]
) -> None:
    job = new_job(_schedule(trigger, Delay(millis=MINUTE)), revision=1)
    satisfied_after: list[int] = []

    for index, event in enumerate(events):
        job, effects = add_event(job, event, T0 + index)
        if any(isinstance(effect, CheckConstraints) for effect in effects):
            satisfied_after.append(index)

    assert satisfied_after == launched_after


def test_a_satisfied_job_waits_for_its_constraints_and_launches_once_they_are_met() -> None:
    schedule = _schedule(Partition(dataset="d", num_partitions=1), Delay(millis=MINUTE))
    job, effects = _feed(new_job(schedule, 1), (T0, _partitions(1)))
    assert job.state is JobState.PENDING_CONSTRAINT
    assert effects[-1] == CheckConstraints(job.key, T0)

    job, effects_now = recheck(job, NO_RUNS, T0)
    assert effects_now == (CheckConstraints(job.key, T0 + MINUTE),)

    launched, effects_later = recheck(job, NO_RUNS, T0 + MINUTE)
    assert launched.state is JobState.PENDING_LAUNCH
    assert _launches(list(effects_later))[0].program == "p"
    assert recheck(launched, NO_RUNS, T0 + 2 * MINUTE) == (launched, ())


def test_a_job_waiting_for_runs_to_end_is_rechecked_on_a_run_end() -> None:
    schedule = _schedule(
        Partition(dataset="d", num_partitions=1),
        Concurrency(max_concurrency=1, wait_until_met=True),
    )
    job, _ = _feed(new_job(schedule, 1), (T0, _partitions(1)))

    job, effects = recheck(job, ConstraintContext(active_runs=1), T0)

    assert effects == (RecheckOnRunEnd(job.key, "p"),)
    assert job.state is JobState.PENDING_CONSTRAINT


def test_a_wait_past_the_timeout_leaves_the_job_to_its_timeout() -> None:
    window = TimeRange(start="22:00", end="23:00", time_zone="UTC")
    schedule = _schedule(Partition(dataset="d", num_partitions=1), window, timeoutMillis=MINUTE)
    job, _ = _feed(new_job(schedule, 1), (T0, _partitions(1)))  # 20:26 UTC

    job, effects = recheck(job, NO_RUNS, T0)
    assert effects == ()
    assert recheck(job, NO_RUNS, T0 + MINUTE)[0].state is JobState.TIMED_OUT


def test_a_constraint_that_aborts_ends_the_job() -> None:
    schedule = _schedule(Partition(dataset="d", num_partitions=1), Concurrency(max_concurrency=1))
    job, _ = _feed(new_job(schedule, 1), (T0, _partitions(1)))

    job, effects = recheck(job, ConstraintContext(active_runs=1), T0)

    assert job.state is JobState.ABORTED
    assert effects == (JobEnded(job.key, JobState.ABORTED, job.reason or ""),)


def test_events_arriving_while_a_job_waits_for_constraints_start_the_next_job() -> None:
    schedule = _schedule(Time(cron="0 * * * *"), TimeRange(start="22:00", end="06:00"))
    fire = TimeFired(cron="0 * * * *", time_zone="UTC", logical_time_ms=T0)
    job, _ = _feed(new_job(schedule, 1), (T0, fire))

    later = fire.model_copy(update={"logical_time_ms": T0 + 60 * MINUTE})
    next_job, effects = add_event(job, later, T0 + 60 * MINUTE)

    assert effects[-1] == CheckConstraints(next_job.key, T0 + 60 * MINUTE)

    assert (job.generation, next_job.generation) == (0, 1)
    assert next_job.state is JobState.PENDING_CONSTRAINT
    assert next_job.events == (later,)


def test_a_time_triggered_run_gets_its_fire_time_as_logical_start_time() -> None:
    schedule = _schedule(Time(cron="0 4 * * *", time_zone="Europe/Berlin"), properties={"k": "v"})
    fire = TimeFired(cron="0 4 * * *", time_zone="Europe/Berlin", logical_time_ms=T0)

    _, effects = add_event(new_job(schedule, 1), fire, T0 + 1234)

    args = _launches(list(effects))[0].arguments.as_runtime_args()
    assert args == {"k": "v", "logicalStartTime": str(T0), "schedule.name": "s"}


def test_a_program_status_triggered_run_gets_the_triggering_run_and_mapped_properties() -> None:
    schedule = _schedule(
        ProgramStatus(program="etl", statuses=frozenset({RunStatus.FAILED})),
        properties={
            "k": "v",
            "triggering.properties.mapping": json.dumps({"cleanup_dir": "src", "x": "absent"}),
        },
    )
    ended = RunEnded(
        program="etl", run_id="run-7", status=RunStatus.FAILED, properties={"src": "/data/in"}
    )

    _, effects = add_event(new_job(schedule, 1), ended, T0)

    args = _launches(list(effects))[0].arguments.as_runtime_args()
    assert args["cleanup_dir"] == "/data/in"
    assert "x" not in args and "triggering.properties.mapping" not in args
    assert (args["triggering.program"], args["triggering.run.id"]) == ("etl", "run-7")
    assert args["triggering.run.status"] == "FAILED"
    assert args["logicalStartTime"] == str(T0)
    assert json.loads(args["triggering.runs"]) == [
        {"program": "etl", "runId": "run-7", "status": "FAILED", "properties": {"src": "/data/in"}}
    ]


def test_a_job_is_json_and_reads_back_equal() -> None:
    schedule = _schedule(Partition(dataset="d", num_partitions=3), Delay(millis=5))
    job, _ = _feed(new_job(schedule, 4), (T0, _partitions(1)), (T0 + 1, _partitions(2)))

    assert Job.model_validate_json(job.model_dump_json()) == job


def test_constraints_of_a_job_without_an_event_cannot_be_checked() -> None:
    job = new_job(_schedule(Partition(dataset="d", num_partitions=1)), 1)

    with pytest.raises(JobStateError, match="has no event"):
        check_constraints(job, NO_RUNS, T0)


# The seeds' Test Scenarios (000) that concern the job and its constraints.


def test_scenario_1_a_minimum_interval_between_runs_lets_only_the_first_partition_launch() -> None:
    schedule = _schedule(Partition(dataset="d", num_partitions=1), LastRun(millis=5 * MINUTE))
    job = new_job(schedule, 1)
    run_end = T0 + 30 * SECOND
    after_run = ConstraintContext(last_run=FinishedRun(run_end, RunStatus.COMPLETED))
    outcomes = []

    for minute in (0, 1, 2, 3, 4, 6):
        now = T0 + minute * MINUTE
        job, _ = add_event(job, _partitions(1), now)
        context = NO_RUNS if minute == 0 else after_run
        job, _ = recheck(job, context, now)
        outcomes.append(job.state)

    assert outcomes == [JobState.PENDING_LAUNCH] + [JobState.ABORTED] * 4 + [
        JobState.PENDING_LAUNCH
    ]


def _update(job: Job, schedule: Schedule) -> Job:
    """Updating is delete-and-recreate: the open job becomes obsolete, a new one starts."""
    obsolete, _ = discard(job, "schedule updated")
    assert obsolete.state is (
        JobState.PENDING_LAUNCH if job.state is JobState.PENDING_LAUNCH else JobState.OBSOLETE
    )
    return new_job(schedule, job.revision + 1, job.generation + 1)


def test_scenario_4_partitions_before_an_update_do_not_count_after_it() -> None:
    before = _schedule(Partition(dataset="d", num_partitions=5), properties={"v": "1"})
    after = before.model_copy(update={"properties": {"v": "2"}})
    job, _ = _feed(new_job(before, 1), (T0, _partitions(1)))

    job = _update(job, after)
    job, effects = _feed(job, *[(T0 + i, _partitions(1)) for i in range(1, 5)])
    assert _launches(effects) == []

    job, effects = _feed(job, (T0 + 10 * SECOND, _partitions(1)))
    assert [launch.arguments.properties for launch in _launches(effects)] == [{"v": "2"}]


def test_scenario_5_an_update_replaces_a_job_waiting_for_its_delay() -> None:
    before = _schedule(Partition(dataset="d", num_partitions=5), Delay(millis=10 * MINUTE))
    after = _schedule(
        Partition(dataset="d", num_partitions=3), Delay(millis=100), properties={"v": "new"}
    )
    waiting, _ = _feed(new_job(before, 1), (T0, _partitions(5)))
    assert waiting.state is JobState.PENDING_CONSTRAINT
    obsolete, ended = discard(waiting, "schedule updated")
    assert ended == (JobEnded(waiting.key, JobState.OBSOLETE, "schedule updated"),)

    job, _ = _feed(
        new_job(after, 2, waiting.generation + 1), *[(T0 + i, _partitions(1)) for i in range(1, 4)]
    )
    job, effects = recheck(job, NO_RUNS, T0 + 3 + 100)

    assert [launch.arguments.properties for launch in _launches(list(effects))] == [{"v": "new"}]
    assert obsolete.state is JobState.OBSOLETE
    assert recheck(obsolete, NO_RUNS, T0 + 10 * MINUTE) == (obsolete, ())


def test_scenario_6_a_partition_after_the_schedule_was_deleted_launches_nothing() -> None:
    job, _ = _feed(
        new_job(_schedule(Partition(dataset="d", num_partitions=5)), 1),
        *[(T0 + i, _partitions(1)) for i in range(4)],
    )
    deleted, _ = discard(job, "schedule deleted")

    after, effects = add_event(deleted, _partitions(1), T0 + 5)

    assert after == deleted
    assert len(effects) == 1 and isinstance(effects[0], EventIgnored)


def test_scenario_7_deleting_during_the_delay_launches_nothing() -> None:
    schedule = _schedule(Partition(dataset="d", num_partitions=5), Delay(millis=40 * SECOND))
    job, _ = _feed(new_job(schedule, 1), (T0, _partitions(5)))
    job, effects = recheck(job, NO_RUNS, T0)
    assert effects == (CheckConstraints(job.key, T0 + 40 * SECOND),)

    deleted, _ = discard(job, "schedule deleted")  # 500 ms before the delay ends

    assert recheck(deleted, NO_RUNS, T0 + 40 * SECOND) == (deleted, ())


def test_scenario_8_a_launch_needs_the_trigger_and_every_constraint() -> None:
    schedule = _schedule(
        Partition(dataset="d", num_partitions=2),
        Delay(millis=MINUTE),
        Concurrency(max_concurrency=1, wait_until_met=True),
        TimeRange(start="20:00", end="21:00"),
    )
    job, effects = _feed(new_job(schedule, 1), (T0, _partitions(1)))
    assert job.state is JobState.PENDING_TRIGGER

    job, _ = _feed(job, (T0 + 1, _partitions(1)))
    job, _ = recheck(job, ConstraintContext(active_runs=1), T0 + MINUTE)
    assert job.state is JobState.PENDING_CONSTRAINT  # the delay passed, a run is active
    job, _ = recheck(job, NO_RUNS, T0 + MINUTE - 1)
    assert job.state is JobState.PENDING_CONSTRAINT  # no run, the delay not yet passed

    job, effects = recheck(job, NO_RUNS, T0 + MINUTE + 1)
    assert job.state is JobState.PENDING_LAUNCH
    assert len(_launches(list(effects))) == 1


def test_scenario_2_a_run_after_an_update_gets_the_updated_properties() -> None:
    before = _schedule(Time(cron="0 * * * *"), properties={"v": "1"})
    after = before.model_copy(update={"properties": {"v": "2"}})
    fire = TimeFired(cron="0 * * * *", time_zone="UTC", logical_time_ms=T0)

    job, first = add_event(new_job(before, 1), fire, T0)
    job = _update(job, after)
    _, second = add_event(job, fire.model_copy(update={"logical_time_ms": T0 + 3_600_000}), T0)

    launched = _launches(list(first + second))
    assert [launch.arguments.properties for launch in launched] == [{"v": "1"}, {"v": "2"}]
    assert launched[0].job_key != launched[1].job_key


# The examples of seed 003's documentation, as it describes their behaviour.


def test_run_only_at_night_once_per_window() -> None:
    schedule = _schedule(
        Partition(dataset="d", num_partitions=1),
        TimeRange(start="22:00", end="06:00"),
        LastRun(millis=6 * 60 * MINUTE),
    )
    afternoon = 1_780_063_200_000  # 2026-05-29T14:00:00Z
    night = afternoon + 8 * 60 * MINUTE  # 22:00

    job, _ = add_event(new_job(schedule, 1), _partitions(1), afternoon)
    job, effects = recheck(job, NO_RUNS, afternoon)
    assert effects == (CheckConstraints(job.key, night),)
    job, effects = recheck(job, NO_RUNS, night)
    assert job.state is JobState.PENDING_LAUNCH

    ran = ConstraintContext(last_run=FinishedRun(night + 40 * MINUTE, RunStatus.COMPLETED))
    late, _ = add_event(job, _partitions(1), night + 60 * MINUTE)
    late, _ = recheck(late, ran, night + 60 * MINUTE)
    assert late.state is JobState.ABORTED

    next_night, _ = add_event(late, _partitions(1), night + 24 * 60 * MINUTE)
    next_night, _ = recheck(next_night, ran, night + 24 * 60 * MINUTE)
    assert next_night.state is JobState.PENDING_LAUNCH


def test_once_hourly_unless_a_run_is_active_or_succeeded_within_the_hour() -> None:
    schedule = _schedule(
        Time(cron="0 * * * *"), Concurrency(max_concurrency=1), LastRun(millis=60 * MINUTE)
    )
    fire = TimeFired(cron="0 * * * *", time_zone="UTC", logical_time_ms=T0)
    outcomes = []

    for context in (
        NO_RUNS,
        ConstraintContext(active_runs=1),
        ConstraintContext(last_run=FinishedRun(T0 - 30 * MINUTE, RunStatus.COMPLETED)),
        ConstraintContext(last_run=FinishedRun(T0 - 30 * MINUTE, RunStatus.FAILED)),
    ):
        job, _ = add_event(new_job(schedule, 1), fire, T0)
        job, _ = recheck(job, context, T0)
        outcomes.append(job.state)

    assert outcomes == [
        JobState.PENDING_LAUNCH,
        JobState.ABORTED,
        JobState.ABORTED,
        JobState.PENDING_LAUNCH,
    ]


def test_the_fire_event_of_a_schedules_cron_is_the_one_its_trigger_counts() -> None:
    schedule = _schedule(
        And(triggers=(Time(cron="0 4 * * *"), Partition(dataset="d", num_partitions=3))),
        time_zone="Europe/Berlin",
    )
    (cron,) = schedule.crons()

    job, _ = _feed(new_job(schedule, 1), (T0, _partitions(1)), (T0 + 1, _partitions(2)))
    job, effects = add_event(job, time_fired(cron, T0 + 2), T0 + 3)

    args = _launches(list(effects))[0].arguments.as_runtime_args()
    assert args["logicalStartTime"] == str(T0 + 2)
    assert json.loads(args["triggering.partitions"]) == [{"dataset": "d", "count": 3}]


def test_the_delay_counts_from_the_first_event_not_from_the_trigger_being_satisfied() -> None:
    schedule = _schedule(Partition(dataset="d", num_partitions=2), Delay(millis=15 * MINUTE))
    job, _ = _feed(new_job(schedule, 1), (T0, _partitions(1)), (T0 + 10 * MINUTE, _partitions(1)))

    job, effects = recheck(job, NO_RUNS, T0 + 10 * MINUTE)
    assert effects == (CheckConstraints(job.key, T0 + 15 * MINUTE),)

    job, effects = recheck(job, NO_RUNS, T0 + 15 * MINUTE)
    assert job.state is JobState.PENDING_LAUNCH


def test_an_event_delivered_again_is_not_counted_twice() -> None:
    schedule = _schedule(
        Or(
            triggers=(
                Time(cron="0 * * * *"),
                ProgramStatus(program="etl", statuses=frozenset({RunStatus.COMPLETED})),
                Partition(dataset="d", num_partitions=2),
            )
        )
    )
    fire = TimeFired(cron="0 * * * *", time_zone="UTC", logical_time_ms=T0)
    ended = RunEnded(program="etl", run_id="r1", status=RunStatus.COMPLETED)
    landed = PartitionsAdded(dataset="d", count=1, event_id="events-0@17")

    for event in (fire, ended):
        launched, effects = add_event(new_job(schedule, 1), event, T0)
        again, effects_again = add_event(launched, event, T0 + 1)
        assert len(_launches(list(effects))) == 1
        assert again == launched
        assert isinstance(effects_again[0], EventIgnored)

    job, _ = _feed(new_job(schedule, 1), (T0, landed), (T0 + 1, landed))
    assert job.state is JobState.PENDING_TRIGGER
    job, _ = _feed(job, (T0 + 2, landed.model_copy(update={"event_id": "events-0@18"})))
    assert job.state is JobState.PENDING_LAUNCH


def ended(job: Job) -> Job:
    return job.model_copy(update={"state": JobState.PENDING_LAUNCH})


def test_trimming_forgets_the_ended_jobs_past_the_newest_five_below_the_oldest_kept() -> None:
    schedule = Schedule(name="s", program="p", trigger=Time(cron="* * * * *"))
    history = [ended(new_job(schedule, 1, g)) for g in range(8)]
    written = new_job(schedule, 1, 8)
    trim = jobs.trim(history, written)
    assert [j.generation for j in trim.gone] == [0, 1, 2]
    assert trim.below == history[3].key
    assert trim.one_by_one == ()
    assert jobs.trim(history[3:], written) == jobs.Trim()


def test_an_old_open_job_is_kept_and_the_ended_jobs_after_it_go_one_by_one() -> None:
    schedule = Schedule(name="s", program="p", trigger=Time(cron="* * * * *"))
    history = [ended(new_job(schedule, 1, 0)), new_job(schedule, 1, 1)]
    history += [ended(new_job(schedule, 1, g)) for g in range(2, 10)]
    trim = jobs.trim(history, new_job(schedule, 1, 10))
    assert [j.generation for j in trim.gone] == [0, 2, 3, 4]
    assert trim.below == history[1].key  # the open job: generation 0 goes with the range
    assert trim.one_by_one == tuple(history[g].key for g in (2, 3, 4))
