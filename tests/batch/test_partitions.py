"""Partitions as start + n x increment, dependency matching on the same arithmetic, templating."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.batch import Dependency, Duration, format_partition, launch, parse_duration, render
from scheduler.batch.partitions import Grid, Never, Upstream, upstream
from tests.batch.helpers import P, config, seed_job


def d(text: str) -> Duration:
    return parse_duration(text, signed=True)


def grid(start: str, increment: str, end: str) -> Grid:
    return Grid(P(start), parse_duration(increment), P(end))


def names(g: Grid) -> list[str]:
    return [format_partition(g.at(n)) for n in range(g.count)]


def test_the_seed_example_has_48_hourly_partitions_in_two_days() -> None:
    g = grid("2000-01-01 00:00:00", "1 hours", "2000-01-03 00:00:00")
    assert g.count == 48
    assert names(g)[0] == "2000-01-01 00:00:00"
    assert names(g)[-1] == "2000-01-02 23:00:00"


def test_a_job_whose_start_equals_its_end_has_no_partition() -> None:
    assert grid("2000-01-01 00:00:00", "1 hours", "2000-01-01 00:00:00").count == 0


def test_the_end_is_exclusive_even_off_the_grid() -> None:
    assert grid("2000-01-01 00:00:00", "1 hours", "2000-01-01 02:30:00").count == 3


def test_monthly_partitions_from_a_month_end_stay_on_month_ends() -> None:
    g = grid("2000-01-31 00:00:00", "1 months", "2001-01-01 00:00:00")
    assert [name[:10] for name in names(g)] == [
        "2000-01-31", "2000-02-29", "2000-03-31", "2000-04-30", "2000-05-31", "2000-06-30",
        "2000-07-31", "2000-08-31", "2000-09-30", "2000-10-31", "2000-11-30", "2000-12-31",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("start", "increment", "at", "floor"),
    [
        ("2000-01-01 00:00:00", "1 hours", "2000-01-01 05:59:59", 5),
        ("2000-01-01 00:00:00", "1 hours", "1999-12-31 23:00:00", -1),
        ("2000-01-31 00:00:00", "1 months", "2000-02-29 00:00:00", 1),
        ("2000-01-31 00:00:00", "1 months", "2000-02-28 23:59:59", 0),
        ("2000-01-31 00:00:00", "1 months", "2000-04-30 00:00:00", 3),
        ("2000-01-31 00:00:00", "3 months", "2000-12-30 00:00:00", 3),
        ("2000-01-01 00:00:00", "1 years", "2005-06-01 00:00:00", 5),
    ],
)
def test_the_partition_at_or_before_an_instant_is_found_without_listing(
    start: str, increment: str, at: str, floor: int
) -> None:
    assert grid(start, increment, "2100-01-01 00:00:00").floor(P(at)) == floor


@pytest.mark.parametrize(
    ("now", "due"),
    [
        ("2000-01-01 00:59:59", 0),
        ("2000-01-01 01:00:00", 1),  # the seed: 00:00 runs once 01:00 has come
        ("2000-01-01 05:30:00", 5),
        ("2000-01-09 00:00:00", 24),
        ("1999-01-01 00:00:00", 0),
    ],
)
def test_a_partition_is_due_once_its_next_partition_began(now: str, due: int) -> None:
    assert grid("2000-01-01 00:00:00", "1 hours", "2000-01-02 00:00:00").due(P(now)) == due


HOURLY = grid("2000-01-01 00:00:00", "1 hours", "2000-01-03 00:00:00")
DAILY = grid("2000-01-01 00:00:00", "1 days", "2000-01-03 00:00:00")
MONTHLY = grid("2000-01-31 00:00:00", "1 months", "2001-01-01 00:00:00")


@pytest.mark.parametrize(
    ("dependant", "n", "dependency", "target", "expected"),
    [
        (HOURLY, 5, Dependency("up", d("0 seconds")), HOURLY, Upstream("up", 5, 6)),
        (HOURLY, 5, Dependency("up", d("-1 hours")), HOURLY, Upstream("up", 4, 5)),
        (HOURLY, 0, Dependency("up", d("-1 hours")), HOURLY, "before up's first"),
        (HOURLY, 47, Dependency("up", d("+1 hours")), HOURLY, "at or after up's end"),
        (HOURLY, 1, Dependency("up", d("0 seconds")), DAILY, "off its grid"),
        (HOURLY, 24, Dependency("up", d("0 seconds")), DAILY, Upstream("up", 1, 2)),
        (MONTHLY, 3, Dependency("up", d("-1 months")), MONTHLY, Upstream("up", 2, 3)),
        (MONTHLY, 1, Dependency("up", d("-1 months")), MONTHLY, Upstream("up", 0, 1)),
        (
            DAILY,
            1,
            Dependency("up", d("0 hours"), d("1 days")),
            HOURLY,
            Upstream("up", 24, 48),
        ),
        (
            DAILY,
            1,
            Dependency("up", d("-1 days"), d("1 days")),
            HOURLY,
            Upstream("up", 0, 48),
        ),
        (
            DAILY,
            0,
            Dependency("up", d("-1 hours"), d("1 days")),
            HOURLY,
            "starts before up's first",
        ),
        (
            DAILY,
            1,
            Dependency("up", d("0 hours"), d("2 days")),
            HOURLY,
            "reaches up's end",
        ),
        (
            HOURLY,
            1,
            Dependency("up", d("0 minutes"), d("30 minutes")),
            DAILY,
            "has no partition in",
        ),
    ],
)
def test_dependency_partitions_are_matched_on_the_same_arithmetic(
    dependant: Grid, n: int, dependency: Dependency, target: Grid, expected: Upstream | str
) -> None:
    found = upstream(dependant, n, dependency, target)
    if isinstance(expected, str):
        assert isinstance(found, Never)
        assert expected in found.reason
    else:
        assert found == expected


def test_a_month_shift_from_a_clamped_month_end_lands_on_the_partition_before() -> None:
    # Apr 30 (clamped from Jan 31 + 3 months) minus one month is Mar 31, not Mar 30.
    found = upstream(MONTHLY, 3, Dependency("up", d("-1 months")), MONTHLY)
    assert isinstance(found, Upstream)
    assert format_partition(MONTHLY.at(found.first)) == "2000-03-31 00:00:00"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("blabla", "blabla"),
        ("", ""),
        (" bla [partition]", " bla [partition]"),
        ("bla [[partition]]", "bla 2018-12-24 01:23:45"),
        (
            "blabla[[partition]]   blabla[[[partition]]]   dkhusefipsef",
            "blabla2018-12-24 01:23:45   blabla[2018-12-24 01:23:45]   dkhusefipsef",
        ),
    ],
)
def test_templating_replaces_every_partition_placeholder(template: str, expected: str) -> None:
    assert render(template, P("2018-12-24 01:23:45")) == expected


def test_a_launch_templates_argv_items_and_both_paths_and_uses_no_shell() -> None:
    job = config(
        seed_job(
            "job1",
            command=["/bin/echo", "[[partition]]", "a; rm -rf / [[partition]]"],
            stdout_path="logs/job1/[[partition]]/out.txt",
            stderr_path="err[[partition]].txt",
        )
    ).jobs[0]
    run = launch(job, P("2000-01-01 05:00:00"))
    assert run.argv == ("/bin/echo", "2000-01-01 05:00:00", "a; rm -rf / 2000-01-01 05:00:00")
    assert run.stdout_path == "logs/job1/2000-01-01 05:00:00/out.txt"
    assert run.stderr_path == "err2000-01-01 05:00:00.txt"
    assert run.key == "job:job1/2000-01-01 05:00:00"


def test_a_program_job_gets_its_partition_among_templated_arguments() -> None:
    job = config(
        {
            k: v
            for k, v in seed_job(
                "load", program="loader", arguments={"day": "[[partition]]"}
            ).items()
            if k not in ("command", "stdout_path", "stderr_path")
        }
    ).jobs[0]
    run = launch(job, P("2000-01-01 05:00:00"))
    assert run.argv is None and run.program == "loader"
    assert run.arguments == {"day": "2000-01-01 05:00:00", "partition": "2000-01-01 05:00:00"}


@given(
    start_day=st.integers(1, 31),
    step=st.integers(1, 14),
    offset_hours=st.integers(-24 * 800, 24 * 800),
)
def test_the_partition_at_or_before_an_instant_brackets_it_on_any_month_grid(
    start_day: int, step: int, offset_hours: int
) -> None:
    g = Grid(
        P(f"2000-01-{start_day:02d} 06:00:00"), Duration(months=step), P("2100-01-01 00:00:00")
    )
    t = g.start + offset_hours * 3_600_000
    n = g.floor(t)
    assert g.at(n) <= t < g.at(n + 1)
    assert g.index_of(g.at(n)) == n
