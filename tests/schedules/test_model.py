"""Schedules read from and written to the seeds' ScheduleDetail JSON, and validated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.schedules import (
    And,
    Concurrency,
    Delay,
    LastRun,
    Or,
    Partition,
    ProgramStatus,
    RunStatus,
    Schedule,
    ScheduleError,
    Time,
    TimeRange,
    parse_schedule,
)
from scheduler.schedules.model import describe

# The seeds' REST shape, as their users wrote it (namespaces, program types and all).
SEED_SCHEDULE = {
    "namespace": "default",
    "application": "PurchaseApp",
    "name": "runOnlyAtNight",
    "description": "clean up once the night's partitions landed",
    "program": {"programName": "cleanupWorkflow", "programType": "WORKFLOW"},
    "properties": {
        "triggered.by": "data",
        "triggering.properties.mapping": json.dumps({"cleanup_dir": "src"}),
    },
    "trigger": {
        "type": "OR",
        "triggers": [
            {
                "type": "PARTITION",
                "dataset": {"namespace": "default", "dataset": "myDataset"},
                "numPartitions": 4,
            },
            {
                "type": "AND",
                "triggers": [
                    {"type": "TIME", "cronExpression": "0 0/5 * * * ?"},
                    {
                        "type": "PROGRAM_STATUS",
                        "programId": {
                            "namespace": "default",
                            "application": "PurchaseApp",
                            "version": "-SNAPSHOT",
                            "type": "WORKFLOW",
                            "entity": "PROGRAM",
                            "program": "dataProcessingWorkflow",
                        },
                        "programStatuses": ["FAILED", "KILLED"],
                    },
                ],
            },
        ],
    },
    "constraints": [
        {
            "type": "TIME_RANGE",
            "startTime": "22:00",
            "endTime": "06:00",
            "timeZone": "America/Los_Angeles",
            "waitUntilMet": True,
        },
        {"type": "LAST_RUN", "millisSinceLastRun": 21_600_000, "waitUntilMet": False},
        {"type": "CONCURRENCY", "maxConcurrency": 1},
        {"type": "DELAY", "millisAfterTrigger": 900_000},
    ],
    "timeoutMillis": 3_600_000,
}


def test_a_seed_schedule_detail_is_read_as_written() -> None:
    schedule = parse_schedule(SEED_SCHEDULE)

    assert schedule.program == "cleanupWorkflow"
    assert schedule.timeout_millis == 3_600_000
    assert schedule.trigger == Or(
        triggers=(
            Partition(dataset="myDataset", num_partitions=4),
            And(
                triggers=(
                    Time(cron="0 0/5 * * * ?"),
                    ProgramStatus(
                        program="dataProcessingWorkflow",
                        statuses=frozenset({RunStatus.FAILED, RunStatus.KILLED}),
                    ),
                )
            ),
        )
    )
    assert schedule.constraints == (
        TimeRange(start="22:00", end="06:00", time_zone="America/Los_Angeles"),
        LastRun(millis=21_600_000),
        Concurrency(max_concurrency=1),
        Delay(millis=900_000),
    )
    assert schedule.properties_mapping() == {"cleanup_dir": "src"}


def test_constraints_take_the_seeds_defaults_for_waiting() -> None:
    schedule = parse_schedule(SEED_SCHEDULE)

    assert [c.wait_until_met for c in schedule.constraints] == [True, False, False, True]


def test_a_schedule_written_as_json_reads_back_equal() -> None:
    schedule = parse_schedule(SEED_SCHEDULE)

    written = schedule.to_json()

    assert parse_schedule(json.dumps(written)) == schedule
    assert written["program"] == {"programName": "cleanupWorkflow"}
    assert written["trigger"]["triggers"][1]["triggers"][1]["programId"] == {
        "program": "dataProcessingWorkflow"
    }
    assert written["constraints"][2] == {
        "type": "CONCURRENCY",
        "maxConcurrency": 1,
        "waitUntilMet": False,
    }


def test_defaults_are_a_day_of_timeout_and_utc() -> None:
    schedule = parse_schedule(
        {
            "name": "daily",
            "program": "p",
            "trigger": {"type": "TIME", "cronExpression": "0 4 * * *"},
        }
    )

    assert schedule.timeout_millis == 86_400_000
    assert schedule.time_zone == "UTC"
    assert schedule.description == ""
    assert schedule.constraints == ()


def test_the_python_api_builds_the_same_schedule_by_field_name() -> None:
    built = Schedule(
        name="daily",
        program="rollup",
        trigger=Time(cron="0 4 * * *", time_zone="Europe/Berlin"),
        constraints=(Concurrency(max_concurrency=1),),
    )

    assert parse_schedule(built.to_json()) == built
    assert built.crons()[0].time_zone == "Europe/Berlin"


def test_a_cron_without_its_own_zone_is_read_in_the_schedules() -> None:
    schedule = Schedule(
        name="s", program="p", trigger=Time(cron="0 4 * * *"), time_zone="America/New_York"
    )

    assert schedule.crons()[0].time_zone == "America/New_York"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"trigger": {"type": "CRON"}}, "trigger: type 'CRON' is unknown; use one of"),
        ({"trigger": {"numPartitions": 1}}, "trigger: has no 'type'; add one of TIME, PARTITION"),
        (
            {"trigger": {"type": "AND", "triggers": [{"type": "PARTITION", "dataset": "d"}]}},
            "trigger.triggers[0].numPartitions: field required (how many partitions",
        ),
        (
            {"trigger": {"type": "PARTITION", "dataset": "d", "numPartitions": 0}},
            "trigger.numPartitions: input should be greater than or equal to 1",
        ),
        (
            {"trigger": {"type": "TIME", "cronExpression": "0 0 12 ? * 2"}},
            "trigger.cronExpression: cron expression '0 0 12 ? * 2' is in Quartz's dialect",
        ),
        (
            {
                "trigger": {
                    "type": "PROGRAM_STATUS",
                    "programId": {"program": "a"},
                    "programStatuses": ["RUNNING"],
                }
            },
            "trigger.programStatuses[0]: input should be 'COMPLETED', 'FAILED' or 'KILLED'",
        ),
        (
            {"trigger": {"type": "PARTITION", "dataset": {"namespace": "prod", "dataset": "d"}}},
            "namespace 'prod' does not exist here",
        ),
        (
            {"constraints": [{"type": "TIME_RANGE", "startTime": "25:00", "endTime": "06:00"}]},
            "constraints[0].startTime: '25:00' is not a time of day; write HH:mm",
        ),
        (
            {"constraints": [{"type": "TIME_RANGE", "startTime": "06:00", "endTime": "6:00"}]},
            "constraints[0]: the window 06:00-6:00 is empty",
        ),
        (
            {"constraints": [{"type": "DELAY", "millisAfterTrigger": 5, "waitUntilMet": False}]},
            "constraints[0].waitUntilMet: a delay always waits",
        ),
        (
            {"constraints": [{"maxConcurrency": 1}]},
            "constraints[0]: has no 'type'; add one of CONCURRENCY, DELAY, TIME_RANGE or LAST_RUN",
        ),
        ({"timeoutMilis": 5}, "timeoutMilis: is not a field here; check its spelling"),
        ({"timeZone": "Mars/Base"}, "timeZone: unknown time zone 'Mars/Base'"),
        ({"name": "two words"}, "name: string should match pattern"),
        (
            {"properties": {"triggering.properties.mapping": "src"}},
            "'triggering.properties.mapping' must be a JSON object",
        ),
    ],
)
def test_an_invalid_schedule_names_the_field_path_and_what_to_write(
    change: dict[str, object], message: str
) -> None:
    data: dict[str, object] = {
        "name": "s",
        "program": "p",
        "trigger": {"type": "TIME", "cronExpression": "0 4 * * *"},
        **change,
    }

    with pytest.raises(ScheduleError) as raised:
        parse_schedule(data)

    assert message in str(raised.value)
    assert str(raised.value).startswith(f"schedule {data['name']!r} is not valid")


def test_every_wrong_field_is_reported_at_once() -> None:
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(
            {
                "name": "s",
                "program": "p",
                "trigger": {"type": "PARTITION", "dataset": "", "numPartitions": -1},
                "timeoutMillis": 0,
            }
        )

    lines = str(raised.value).splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == [
        "trigger.dataset",
        "trigger.numPartitions",
        "timeoutMillis",
    ]


def test_a_text_that_is_not_json_says_so() -> None:
    with pytest.raises(ScheduleError, match="a schedule must be JSON"):
        parse_schedule("{name: s}")


def test_the_seeds_pipeline_form_of_the_properties_mapping_is_read_too() -> None:
    mapping = {"arguments": [{"source": "src", "target": "cleanup_dir"}], "pluginProperties": []}
    schedule = parse_schedule(
        {
            "name": "s",
            "program": "p",
            "properties": {"triggering.properties.mapping": json.dumps(mapping)},
            "trigger": {
                "type": "PROGRAM_STATUS",
                "programId": {"program": "a"},
                "programStatuses": ["COMPLETED"],
            },
        }
    )

    assert schedule.properties_mapping() == {"cleanup_dir": "src"}


def test_the_example_in_the_docs_is_a_valid_schedule() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "schedules.md").read_text("utf-8")
    example = page.split("```json\n", 1)[1].split("```", 1)[0]

    schedule = parse_schedule(example)

    assert schedule.name == "runOnlyAtNight"
    assert isinstance(schedule.trigger, Or)
    assert schedule.properties_mapping() == {"cleanup_dir": "src"}


def test_a_schedules_next_and_previous_fire_is_the_nearest_of_its_time_triggers() -> None:
    schedule = Schedule(
        name="s",
        program="p",
        trigger=Or(
            triggers=(
                Time(cron="0 4 * * *", time_zone="Europe/Berlin"),  # 02:00 UTC in summer
                And(triggers=(Time(cron="30 3 * * *"), Partition(dataset="d", num_partitions=1))),
            )
        ),
    )
    midnight = 1_780_012_800_000  # 2026-05-29T00:00:00Z

    assert schedule.next_fire_after(midnight) == midnight + 2 * 3_600_000
    assert schedule.previous_fire_before(midnight) == midnight - (20 * 60 + 30) * 60_000
    no_time = Schedule(name="s", program="p", trigger=Partition(dataset="d", num_partitions=1))
    assert no_time.next_fire_after(midnight) is None


def test_a_trigger_is_described_on_one_line_for_tables() -> None:
    cron = Time(cron="5 * * * *", time_zone="Europe/Berlin")
    landed = Partition(dataset="clicks", num_partitions=24)
    ended = ProgramStatus(program="rollup", statuses={RunStatus.FAILED, RunStatus.COMPLETED})
    assert describe(cron) == "cron 5 * * * * Europe/Berlin"
    # A cron without a zone of its own names the schedule's (UTC unless it says).
    assert describe(Time(cron="0 4 * * *")) == "cron 0 4 * * * UTC"
    assert describe(Time(cron="0 4 * * *"), "Asia/Tokyo") == "cron 0 4 * * * Asia/Tokyo"
    assert describe(Partition(dataset="d", num_partitions=1)) == "1 partition of d"
    assert describe(ended) == "rollup COMPLETED|FAILED"
    nested = And(triggers=(cron, Or(triggers=(landed, ended))))
    assert describe(nested) == (
        "(cron 5 * * * * Europe/Berlin) AND "
        "((24 partitions of clicks) OR (rollup COMPLETED|FAILED))"
    )
