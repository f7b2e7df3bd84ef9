"""The seed's configuration file, checked: accepted as written, refused with every reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.batch import (
    BatchConfigError,
    OnFailure,
    format_partition,
    parse_configuration,
    parse_duration,
)
from tests.batch.helpers import seed_config, seed_job

HERE = Path(__file__).parent


def problems(data: Any) -> list[str]:
    with pytest.raises(BatchConfigError) as error:
        parse_configuration(data)
    return [str(problem) for problem in error.value.problems]


def test_the_seed_example_is_accepted_as_written() -> None:
    config = parse_configuration((HERE / "seed_example.json").read_text())
    assert config.max_parallelism == 10
    assert config.scheduler_polling_time == parse_duration("1000 millis")
    job1, job2 = config.jobs
    assert job1.command == ("/bin/echo", "[[partition]]")
    assert format_partition(job1.start) == "2000-01-01 00:00:00"
    assert format_partition(job1.end) == "2000-01-03 00:00:00"
    assert job1.failure.on_failure is OnFailure.RETRY
    assert job1.failure.retry_delay == parse_duration("15 minutes")
    assert job1.max_parallelism == 6
    assert [(d.job, d.shift.millis) for d in job2.dependencies] == [
        ("job1", 0),
        ("job1", -3_600_000),
    ]
    assert job2.failure.on_failure is OnFailure.MARK_SUCCESS
    assert job2.stdout_path == "/home/something/something/log.txt"


def test_the_example_in_the_docs_is_the_seeds_and_is_accepted() -> None:
    page = (HERE.parents[1] / "docs" / "batch-jobs.md").read_text()
    example = page.split("```json\n", 1)[1].split("```", 1)[0]
    seed = (HERE / "seed_example.json").read_text()
    assert json.loads(example) == json.loads(seed)
    assert parse_configuration(example) == parse_configuration(seed)


def test_the_seeds_minimal_configuration_without_jobs_is_accepted() -> None:
    assert parse_configuration((HERE / "seed_minimal.json").read_text()).jobs == ()


def test_our_optional_fields_are_read() -> None:
    job = seed_job(
        "daily",
        increment="1 days",
        max_attempts=3,
        retry_backoff=2,
        max_retry_delay="1 hours",
        catch_up="30 days",
        dependencies=[{"name": "daily", "from": "-1 days", "to": "0 days"}],
    )
    (parsed,) = parse_configuration(seed_config(job)).jobs
    assert parsed.failure.max_attempts == 3
    assert parsed.failure.retry_backoff == 2.0
    assert parsed.catch_up == parse_duration("30 days")
    assert parsed.dependencies[0].is_range


def test_on_failure_is_read_whatever_its_case_as_the_seed_does() -> None:
    (job,) = parse_configuration(seed_config(seed_job("a", on_failure="MARK_SUCCESS"))).jobs
    assert job.failure.on_failure is OnFailure.MARK_SUCCESS


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("something, something", "the configuration: the file is not JSON"),
        ("[]", "the configuration: must be a JSON object"),
        (
            seed_config() | {"jobs": [""]},
            "jobs[0]: a job must be a JSON object",
        ),
        (seed_config() | {"jobs": ""}, "jobs: '' is not a list"),
        (
            seed_config(seed_job("job2"), seed_job("job2")),
            "jobs[1].name (job 'job2'): this name is already used",
        ),
        (
            seed_config(
                seed_job("job2"),
                seed_job(
                    "job1",
                    dependencies=[
                        {"name": "job2", "shift": "0 seconds"},
                        {"name": "blablabla", "shift": "-1 hours"},
                    ],
                ),
            ),
            "jobs[1].dependencies[1].name (job 'job1'): no job is named 'blablabla'",
        ),
        (
            seed_config(seed_job("job1", command=[])),
            "jobs[0].command (job 'job1'): is empty",
        ),
        (
            seed_config(seed_job("job1", increment="0 hours")),
            "jobs[0].increment (job 'job1'): '0 hours' is zero",
        ),
        (
            seed_config(seed_job("job1", increment="1500 millis")),
            "jobs[0].increment (job 'job1'): 1500 millis is not a whole number of seconds",
        ),
        (
            seed_config(seed_job("job1", retention="30 day")),
            "jobs[0].retention (job 'job1'): '30 day' is not a duration",
        ),
        (
            seed_config(seed_job("job1", start_partition="2000-01-01")),
            "jobs[0].start_partition (job 'job1'): '2000-01-01' is not a partition date",
        ),
        (
            seed_config(seed_job("job1", end_partition="1999-01-01 00:00:00")),
            "jobs[0].end_partition (job 'job1'): 1999-01-01 00:00:00 is before start_partition",
        ),
        (
            seed_config(seed_job("job1", on_failure="ignore")),
            "jobs[0].on_failure (job 'job1'): 'ignore' is unknown; use retry or mark_success",
        ),
        (
            seed_config(seed_job("job1", max_parallelism=-1)),
            "jobs[0].max_parallelism (job 'job1'): -1 is not an integer 0 or more",
        ),
        (
            seed_config(seed_job("job1", dependencies=[{"name": "job1", "shift": "0 hours"}])),
            "jobs[0].dependencies[0].shift (job 'job1'): a job waiting for its own partition",
        ),
        (
            seed_config(seed_job("job1", retry_dealy="1 hours")),
            "jobs[0].retry_dealy (job 'job1'): is not a field here",
        ),
        (
            seed_config(seed_job("job1", program="p")),
            "jobs[0] (job 'job1'): give exactly one of command (argv), program or spark_job",
        ),
        (
            seed_config(seed_job("job1", arguments={"a": "b"})),
            "jobs[0].arguments (job 'job1'): a command takes its arguments in its argv list",
        ),
        (
            seed_config(seed_job("daily/report")),
            "jobs[0].name (job 'daily/report'): 'daily/report' cannot name a job",
        ),
        (
            seed_config(seed_job("a" * 201)),
            "jobs[0].name (job 'aaaa",
        ),
        (
            seed_config() | {"scheduler_polling_time": "0 millis"},
            "scheduler_polling_time: '0 millis' is zero",
        ),
        (
            {k: v for k, v in seed_config().items() if k != "max_parallelism"},
            "max_parallelism: is missing",
        ),
    ],
)
def test_an_invalid_configuration_is_refused_naming_the_field_the_job_and_the_fix(
    data: Any, expected: str
) -> None:
    found = problems(data if isinstance(data, str) else json.dumps(data))
    assert any(problem.startswith(expected) for problem in found), found


def test_every_problem_of_a_file_is_reported_at_once() -> None:
    data = seed_config(
        seed_job("a", increment="0 hours", command=[]),
        seed_job("a", retention="forever"),
        seed_job("b", dependencies=[{"name": "nobody", "shift": "-1 hours"}]),
    )
    found = problems(data)
    assert found == [
        "jobs[0].increment (job 'a'): '0 hours' is zero; give a positive duration",
        "jobs[0].command (job 'a'): is empty; give the program to run and its arguments, e.g. "
        '["/bin/echo", "[[partition]]"] (run as argv, never through a shell)',
        "jobs[1].retention (job 'a'): 'forever' is not a duration; write '<integer> <unit>' "
        "with a unit among millis, seconds, minutes, hours, days, months, years, e.g. '1 hours'",
        "jobs[1].name (job 'a'): this name is already used; give each job its own",
        "jobs[2].dependencies[0].name (job 'b'): no job is named 'nobody'; the jobs are ['a', 'b']",
    ]


def test_the_error_message_counts_and_lists_the_problems() -> None:
    with pytest.raises(BatchConfigError) as error:
        parse_configuration(seed_config(seed_job("a", command=[])))
    assert str(error.value).startswith("the batch configuration is not valid (1 problem):\n  ")


@pytest.mark.parametrize(
    ("shift", "start", "expected"),
    [
        (
            "30 minutes",
            "2000-01-01 00:00:00",
            "P + 30 minutes is never a partition of up: it always falls",
        ),
        (
            "0 hours",
            "2000-01-01 00:15:00",
            "P + 0 hours is never a partition of up: it always falls",
        ),
        ("1500 millis", "2000-01-01 00:00:00", "1500 millis is not a whole number of seconds"),
    ],
)
def test_a_dependency_that_never_lands_on_a_partition_is_refused(
    shift: str, start: str, expected: str
) -> None:
    data = seed_config(
        seed_job("up"),
        seed_job("down", start_partition=start, dependencies=[{"name": "up", "shift": shift}]),
    )
    found = problems(data)
    assert len(found) == 1 and found[0].startswith("jobs[1].dependencies[0].shift (job 'down'): ")
    assert expected in found[0]


def test_a_dependency_that_lands_on_some_partitions_is_accepted() -> None:
    # An hourly job on a daily one: its midnight partition waits, the others are blocked.
    daily = seed_job("daily", increment="1 days", end_partition="2000-01-10 00:00:00")
    hourly = seed_job("hourly", dependencies=[{"name": "daily", "shift": "0 hours"}])
    assert len(parse_configuration(seed_config(daily, hourly)).jobs) == 2


@pytest.mark.parametrize("text", ["", "   ", "{}"])
def test_an_empty_configuration_is_refused_naming_what_is_missing(text: str) -> None:
    found = problems(text)
    if text.strip():
        assert found == [
            "max_parallelism: is missing; give an integer, 0 or more",
            "scheduler_polling_time: is missing; give a duration such as '1 hours'",
            "new_configuration_polling_time: is missing; give a duration such as '1 hours'",
            "jobs: is missing; give a list (it may be empty)",
        ]
    else:
        assert len(found) == 1 and found[0].startswith("the configuration: the file is not JSON")
