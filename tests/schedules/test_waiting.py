"""Why a schedule's job waits, as the API and the dashboard say it: the trigger parts its events
do not satisfy yet, then the constraints."""

from __future__ import annotations

from scheduler.schedules.events import PartitionsAdded, RunEnded
from scheduler.schedules.job import Job, JobState, new_job
from scheduler.schedules.model import RunStatus
from scheduler.schedules.parse import parse_schedule
from scheduler.schedules.waiting import waiting_on

SCHEDULE = parse_schedule(
    {
        "name": "sales-daily",
        "program": "report",
        "trigger": {
            "type": "AND",
            "triggers": [
                {"type": "PARTITION", "dataset": "sales", "numPartitions": 5},
                {
                    "type": "PROGRAM_STATUS",
                    "programId": {"program": "ingest"},
                    "programStatuses": ["COMPLETED"],
                },
            ],
        },
        "constraints": [
            {"type": "CONCURRENCY", "maxConcurrency": 1},
            {"type": "TIME_RANGE", "startTime": "01:00", "endTime": "05:00"},
        ],
    }
)


def _job(*events: object, state: JobState = JobState.PENDING_TRIGGER) -> Job:
    return new_job(SCHEDULE, revision=1).model_copy(update={"events": events, "state": state})


def test_a_job_short_of_partitions_names_the_count_and_the_run_it_waits_for() -> None:
    job = _job(PartitionsAdded(dataset="sales", count=3, event_id="a"))
    assert waiting_on(job) == [
        "PARTITION trigger on sales: 3 of 5 partitions",
        "PROGRAM_STATUS trigger: a run of ingest ending COMPLETED",
    ]


def test_a_satisfied_part_is_no_longer_named() -> None:
    ended = RunEnded(program="ingest", run_id="r1", status=RunStatus.COMPLETED)
    job = _job(PartitionsAdded(dataset="sales", count=2, event_id="a"), ended)
    assert waiting_on(job) == ["PARTITION trigger on sales: 2 of 5 partitions"]


def test_a_triggered_job_waits_on_its_constraints_and_an_ended_one_on_nothing() -> None:
    assert waiting_on(_job(state=JobState.PENDING_CONSTRAINT)) == [
        "CONCURRENCY constraint: at most 1 run(s) at once",
        "TIME_RANGE constraint: between 01:00 and 05:00",
    ]
    assert waiting_on(_job(state=JobState.OBSOLETE)) == []
