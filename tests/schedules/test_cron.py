"""Cron next and previous fires, read on a zone's wall clock, across daylight-saving changes."""

from __future__ import annotations

import itertools
import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from scheduler.model import from_epoch_ms, to_epoch_ms
from scheduler.schedules.cron import normalize, parse_cron, wall_to_instant_ms
from scheduler.schedules.errors import CronError, ScheduleError


def _ms(zone: str, text: str) -> int:
    """An instant written as its wall time in `zone` with its offset: '2026-03-29 03:00 +02:00'."""
    moment = datetime.strptime(text, "%Y-%m-%d %H:%M:%S %z")
    assert moment.astimezone(ZoneInfo(zone)).utcoffset() == moment.utcoffset(), text
    return to_epoch_ms(moment)


def _wall(zone: str, instant_ms: int) -> str:
    return from_epoch_ms(instant_ms).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %z")


# (zone, expression, after, the next fires): each fire is its wall time with the zone's offset.
NEXT_FIRES = [
    # Europe/Berlin springs forward on 2026-03-29: 02:00 CET becomes 03:00 CEST.
    (
        "Europe/Berlin",
        "30 2 * * *",
        "2026-03-28 12:00:00 +0100",
        ["2026-03-29 03:00:00 +0200", "2026-03-30 02:30:00 +0200"],
    ),
    (
        "Europe/Berlin",
        "*/30 * * * *",
        "2026-03-29 01:00:00 +0100",
        ["2026-03-29 01:30:00 +0100", "2026-03-29 03:00:00 +0200", "2026-03-29 03:30:00 +0200"],
    ),
    # ... and falls back on 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:xx happens twice.
    (
        "Europe/Berlin",
        "30 2 * * *",
        "2026-10-24 12:00:00 +0200",
        ["2026-10-25 02:30:00 +0200", "2026-10-26 02:30:00 +0100"],
    ),
    (
        "Europe/Berlin",
        "0,30 * * * *",
        "2026-10-25 01:45:00 +0200",
        [
            "2026-10-25 02:00:00 +0200",
            "2026-10-25 02:30:00 +0200",
            "2026-10-25 03:00:00 +0100",
            "2026-10-25 03:30:00 +0100",
        ],
    ),
    # America/New_York springs forward on 2026-03-08 (02:00 EST -> 03:00 EDT) ...
    (
        "America/New_York",
        "15 2 * * *",
        "2026-03-07 12:00:00 -0500",
        ["2026-03-08 03:00:00 -0400", "2026-03-09 02:15:00 -0400"],
    ),
    (
        "America/New_York",
        "0 3 * * *",
        "2026-03-07 12:00:00 -0500",
        ["2026-03-08 03:00:00 -0400", "2026-03-09 03:00:00 -0400"],
    ),
    # ... and falls back on 2026-11-01 (02:00 EDT -> 01:00 EST; 01:xx happens twice).
    (
        "America/New_York",
        "30 1 * * *",
        "2026-10-31 12:00:00 -0400",
        ["2026-11-01 01:30:00 -0400", "2026-11-02 01:30:00 -0500"],
    ),
    (
        "America/New_York",
        "*/20 * * * *",
        "2026-11-01 00:50:00 -0400",
        [
            "2026-11-01 01:00:00 -0400",
            "2026-11-01 01:20:00 -0400",
            "2026-11-01 01:40:00 -0400",
            "2026-11-01 02:00:00 -0500",
        ],
    ),
    # Asked from inside the second pass of the repeated hour: its wall times fired already.
    (
        "America/New_York",
        "*/20 * * * *",
        "2026-11-01 01:10:00 -0500",
        ["2026-11-01 02:00:00 -0500", "2026-11-01 02:20:00 -0500"],
    ),
    # Six fields, seconds first, obey the same rule.
    (
        "Europe/Berlin",
        "15 30 2 * * *",
        "2026-03-28 12:00:00 +0100",
        ["2026-03-29 03:00:00 +0200", "2026-03-30 02:30:15 +0200"],
    ),
    (
        "Europe/Berlin",
        "0 30 2 * * *",
        "2026-10-25 00:00:00 +0200",
        ["2026-10-25 02:30:00 +0200", "2026-10-26 02:30:00 +0100"],
    ),
    (
        "UTC",
        "*/20 * * * * *",
        "2026-01-01 00:00:00 +0000",
        ["2026-01-01 00:00:20 +0000", "2026-01-01 00:00:40 +0000", "2026-01-01 00:01:00 +0000"],
    ),
    # The seeds' Quartz dialect, where its text means the same.
    (
        "UTC",
        "0 0/5 * * * ?",
        "2026-01-01 00:02:00 +0000",
        ["2026-01-01 00:05:00 +0000", "2026-01-01 00:10:00 +0000"],
    ),
    (
        "UTC",
        "0 0 12 ? * MON-FRI",
        "2026-01-02 13:00:00 +0000",  # a Friday
        ["2026-01-05 12:00:00 +0000", "2026-01-06 12:00:00 +0000"],
    ),
    (
        "UTC",
        "0 0 4 L * ? *",
        "2026-01-01 00:00:00 +0000",
        ["2026-01-31 04:00:00 +0000", "2026-02-28 04:00:00 +0000"],
    ),
    # A skipped fire and the fire at the shift itself are one fire.
    (
        "Europe/Berlin",
        "0 2,3 * * *",
        "2026-03-29 00:00:00 +0100",
        ["2026-03-29 03:00:00 +0200", "2026-03-30 02:00:00 +0200"],
    ),
]


@pytest.mark.parametrize(("zone", "expression", "after", "fires"), NEXT_FIRES)
def test_next_fires_follow_the_wall_clock_and_the_dst_rule(
    zone: str, expression: str, after: str, fires: list[str]
) -> None:
    cron = parse_cron(expression, zone)

    found = cron.next_fires(_ms(zone, after), len(fires))

    assert [_wall(zone, fire) for fire in found] == fires


@pytest.mark.parametrize(("zone", "expression", "after", "fires"), NEXT_FIRES)
def test_the_previous_fire_before_a_fire_is_the_one_before_it(
    zone: str, expression: str, after: str, fires: list[str]
) -> None:
    cron = parse_cron(expression, zone)
    instants = [_ms(zone, fire) for fire in fires]

    for earlier, later in itertools.pairwise(instants):
        assert cron.previous_before(later) == earlier
        assert cron.previous_before(later - 1) == earlier
        assert cron.next_after(earlier) == later


def test_the_previous_fire_asked_in_the_repeated_hour_is_the_latest_of_its_first_pass() -> None:
    cron = parse_cron("*/20 * * * *", "America/New_York")

    previous = cron.previous_before(_ms("America/New_York", "2026-11-01 01:10:00 -0500"))

    assert _wall("America/New_York", previous) == "2026-11-01 01:40:00 -0400"


def test_the_previous_fire_before_the_shift_is_not_the_collapsed_skipped_one() -> None:
    cron = parse_cron("30 2 * * *", "Europe/Berlin")
    shift = _ms("Europe/Berlin", "2026-03-29 03:00:00 +0200")

    assert _wall("Europe/Berlin", cron.previous_before(shift + 1)) == "2026-03-29 03:00:00 +0200"
    assert _wall("Europe/Berlin", cron.previous_before(shift)) == "2026-03-28 02:30:00 +0100"


def test_a_fire_exactly_at_the_instant_asked_about_is_not_next() -> None:
    cron = parse_cron("0 * * * *", "UTC")
    noon = _ms("UTC", "2026-01-01 12:00:00 +0000")

    assert cron.next_after(noon) == noon + 3_600_000
    assert cron.next_after(noon - 1) == noon
    assert cron.previous_before(noon) == noon - 3_600_000


def test_a_skipped_wall_time_maps_to_the_instant_the_clocks_jump() -> None:
    berlin = ZoneInfo("Europe/Berlin")

    instant = wall_to_instant_ms(datetime(2026, 3, 29, 2, 17, 33), berlin)

    assert _wall("Europe/Berlin", instant) == "2026-03-29 03:00:00 +0200"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 0 12 ? * 2", "the equivalent is '0 0 12 * * MON'"),
        ("0 0 12 ? * 2-6", "the equivalent is '0 0 12 * * MON-FRI'"),
        ("0 15 10 ? * 6L", "the equivalent is '0 15 10 * * 5L'"),
        ("0 15 10 ? * 6#3", "the equivalent is '0 15 10 * * FRI#3'"),
        ("0 0 12 ? * L", "the equivalent is '0 0 12 * * SAT'"),
        ("0 0 12 * * ? 2027", "equivalent without it: '0 0 12 * * ?'"),
        ("0 0 12 15W * ?", "has no equivalent here"),
        ("0 0 12 L-3 * ?", "has no equivalent here"),
        ("0 0 12 * * * *", "exactly one of day-of-month and day-of-week"),
    ],
)
def test_quartz_expressions_that_mean_something_else_here_are_refused_with_the_equivalent(
    expression: str, message: str
) -> None:
    with pytest.raises(CronError, match=re.escape(message)):
        parse_cron(expression, "UTC")


def test_the_equivalent_shown_for_a_quartz_expression_is_accepted_and_means_its_days() -> None:
    cron = parse_cron("0 0 12 * * MON", "UTC")

    fire = cron.next_after(_ms("UTC", "2026-01-01 00:00:00 +0000"))

    assert from_epoch_ms(fire).strftime("%A %H:%M") == "Monday 12:00"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("61 * * * *", "bad minute field '61'"),
        ("* * 32 * *", "bad day-of-month field '32'"),
        ("* * *", "has 3 fields"),
        ("0 ? * * * ?", "in a day field only"),
    ],
)
def test_an_unreadable_expression_names_the_field_and_the_forms(
    expression: str, message: str
) -> None:
    with pytest.raises(CronError, match=re.escape(message)):
        normalize(expression)


def test_an_unknown_time_zone_is_refused_with_an_example_of_a_good_one() -> None:
    with pytest.raises(ScheduleError, match=r"'Europe/Berln'.*Europe/Berlin"):
        parse_cron("0 4 * * *", "Europe/Berln")


def test_five_fields_read_sunday_as_zero_and_seven() -> None:
    cron = parse_cron("0 9 * * 0", "UTC")
    also = parse_cron("0 9 * * 7", "UTC")
    start = _ms("UTC", "2026-01-01 00:00:00 +0000")

    assert cron.next_after(start) == also.next_after(start)
    assert from_epoch_ms(cron.next_after(start)).strftime("%A") == "Sunday"


@pytest.mark.parametrize(
    ("macro", "fields"),
    [
        ("@hourly", "0 0 * * * *"),
        ("@daily", "0 0 0 * * *"),
        ("@midnight", "0 0 0 * * *"),
        ("@weekly", "0 0 0 * * 0"),
        ("@monthly", "0 0 0 1 * *"),
        ("@yearly", "0 0 0 1 1 *"),
        ("@annually", "0 0 0 1 1 *"),
    ],
)
def test_vixie_macros_read_as_their_five_fields(macro: str, fields: str) -> None:
    assert normalize(macro) == fields


@pytest.mark.parametrize(
    ("quartz", "days"),
    [
        ("0 0 12 ? * 1/2", {"Sunday", "Tuesday", "Thursday", "Saturday"}),
        ("0 0 12 ? * 2-6/2", {"Monday", "Wednesday", "Friday"}),
        ("0 0 12 ? * 2,4", {"Monday", "Wednesday"}),
        ("0 0 12 ? * 7", {"Saturday"}),
        ("0 0 12 ? * 6L", {"Friday"}),
    ],
)
def test_the_equivalent_shown_fires_on_the_days_quartz_meant(quartz: str, days: set[str]) -> None:
    with pytest.raises(CronError) as refused:
        parse_cron(quartz, "UTC")
    equivalent = re.search(r"the equivalent is '([^']+)'", str(refused.value))
    assert equivalent is not None

    cron = parse_cron(equivalent.group(1), "UTC")
    fires = cron.next_fires(_ms("UTC", "2026-01-01 00:00:00 +0000"), 12)

    assert {from_epoch_ms(fire).strftime("%A") for fire in fires} == days
