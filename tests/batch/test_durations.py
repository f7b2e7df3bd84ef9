"""Durations as the seed writes them, and the one calendar arithmetic."""

from __future__ import annotations

import pytest

from scheduler.batch.durations import (
    Duration,
    add,
    add_months,
    format_partition,
    parse_duration,
    parse_partition,
)

P = parse_partition


@pytest.mark.parametrize(
    ("text", "signed", "expected"),
    [
        ("1000 millis", False, Duration(millis=1000)),
        ("0 seconds", False, Duration()),
        ("15 minutes", False, Duration(millis=900_000)),
        ("1 hours", False, Duration(millis=3_600_000)),
        ("30 days", False, Duration(millis=30 * 86_400_000)),
        ("6 months", False, Duration(months=6)),
        ("2 years", False, Duration(months=24)),
        ("-1 hours", True, Duration(millis=-3_600_000)),
        ("+2 days", True, Duration(millis=2 * 86_400_000)),
        ("1 HOURS", False, Duration(millis=3_600_000)),
        ("3 Months", False, Duration(months=3)),
    ],
)
def test_durations_are_read_as_the_seed_writes_them(
    text: str, signed: bool, expected: Duration
) -> None:
    assert parse_duration(text, signed=signed) == expected


@pytest.mark.parametrize(
    ("text", "signed", "says"),
    [
        ("1 hour", False, "unit among millis, seconds"),
        ("1hours", False, "'<integer> <unit>'"),
        ("hours", False, "not a duration"),
        ("1.5 hours", False, "not a duration"),
        ("-1 hours", False, "only a dependency's shift may be"),
        ("", True, "not a duration"),
    ],
)
def test_a_bad_duration_is_refused_saying_what_to_write(text: str, signed: bool, says: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_duration(text, signed=signed)
    assert says in str(error.value)


@pytest.mark.parametrize(
    ("months", "expected"),
    [
        (1, "2000-02-29 10:30:00"),
        (2, "2000-03-31 10:30:00"),
        (3, "2000-04-30 10:30:00"),
        (13, "2001-02-28 10:30:00"),
        (-1, "1999-12-31 10:30:00"),
        (-2, "1999-11-30 10:30:00"),
        (0, "2000-01-31 10:30:00"),
    ],
)
def test_months_are_counted_from_the_anchor_and_the_day_clamped_once(
    months: int, expected: str
) -> None:
    assert format_partition(add_months(P("2000-01-31 10:30:00"), months)) == expected


def test_repeated_month_steps_would_drift_where_counting_from_the_anchor_does_not() -> None:
    stepped = P("2000-01-31 00:00:00")
    for _ in range(3):
        stepped = add_months(stepped, 1)
    assert format_partition(stepped) == "2000-04-29 00:00:00"  # what the seed's loop produces
    assert format_partition(add_months(P("2000-01-31 00:00:00"), 3)) == "2000-04-30 00:00:00"


def test_a_day_is_always_24_hours_in_utc() -> None:
    assert add(P("2000-03-26 00:00:00"), parse_duration("1 days")) == P("2000-03-27 00:00:00")


def test_partitions_are_read_and_written_as_yyyy_mm_dd_hh_mm_ss_in_utc() -> None:
    assert P("1970-01-01 00:00:01") == 1000
    assert format_partition(P("2018-12-24 01:23:45")) == "2018-12-24 01:23:45"
    with pytest.raises(ValueError, match="yyyy-MM-dd HH:mm:ss"):
        P("2000-01-01T00:00:00")
