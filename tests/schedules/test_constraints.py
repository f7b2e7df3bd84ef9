"""Constraint verdicts with the exact instants at which a waiting job must be checked again."""

from __future__ import annotations

from datetime import datetime

import pytest

from scheduler.model import to_epoch_ms
from scheduler.schedules import (
    Abort,
    Concurrency,
    ConstraintContext,
    Delay,
    FinishedRun,
    LastRun,
    Met,
    RunStatus,
    Schedule,
    Time,
    TimeRange,
    Verdict,
    Wait,
)
from scheduler.schedules.constraints import check_all

MINUTE = 60_000
HOUR = 60 * MINUTE


def _at(text: str) -> int:
    """An instant written with its offset: '2026-06-01 21:59:59 +0200'."""
    return to_epoch_ms(datetime.strptime(text, "%Y-%m-%d %H:%M:%S %z"))


def _schedule(*constraints: object, zone: str = "UTC") -> Schedule:
    return Schedule.model_validate(
        {
            "name": "s",
            "program": "report",
            "trigger": Time(cron="0 * * * *"),
            "constraints": constraints,
            "timeZone": zone,
        }
    )


def _check(schedule: Schedule, now: int, first: int | None = None, **context: object) -> Verdict:
    return check_all(schedule, now if first is None else first, ConstraintContext(**context), now)  # type: ignore[arg-type]


NIGHT = TimeRange(start="22:00", end="06:00", time_zone="Europe/Berlin")
DAY = TimeRange(start="09:00", end="17:30", time_zone="Europe/Berlin")

# (window, checked at, expected: None when met, else the instant it opens)
WINDOWS = [
    (NIGHT, "2026-06-01 21:59:59 +0200", "2026-06-01 22:00:00 +0200"),  # just before: wait
    (NIGHT, "2026-06-01 22:00:00 +0200", None),  # start is inclusive
    (NIGHT, "2026-06-01 23:59:00 +0200", None),
    (NIGHT, "2026-06-02 00:00:00 +0200", None),  # past midnight, still inside
    (NIGHT, "2026-06-02 05:59:59 +0200", None),
    (NIGHT, "2026-06-02 06:00:00 +0200", "2026-06-02 22:00:00 +0200"),  # end is exclusive
    (NIGHT, "2026-06-02 12:00:00 +0200", "2026-06-02 22:00:00 +0200"),
    (DAY, "2026-06-02 08:00:00 +0200", "2026-06-02 09:00:00 +0200"),  # before: today
    (DAY, "2026-06-02 09:00:00 +0200", None),
    (DAY, "2026-06-02 17:29:59 +0200", None),
    (DAY, "2026-06-02 17:30:00 +0200", "2026-06-03 09:00:00 +0200"),  # after: tomorrow
    # Over the spring change, the next opening is found on the new offset.
    (NIGHT, "2026-03-29 12:00:00 +0200", "2026-03-29 22:00:00 +0200"),
    (DAY, "2026-03-28 18:00:00 +0100", "2026-03-29 09:00:00 +0200"),
]


@pytest.mark.parametrize(("window", "now", "opens"), WINDOWS)
def test_a_time_window_is_met_inside_and_otherwise_waits_for_its_next_opening(
    window: TimeRange, now: str, opens: str | None
) -> None:
    verdict = _check(_schedule(window), _at(now))

    if opens is None:
        assert verdict == Met()
    else:
        assert isinstance(verdict, Wait)
        assert verdict.until_ms == _at(opens)
        assert not verdict.on_run_end


def test_a_window_that_opens_in_a_skipped_hour_opens_at_the_jump() -> None:
    window = TimeRange(start="02:30", end="04:00", time_zone="Europe/Berlin")

    verdict = _check(_schedule(window), _at("2026-03-29 01:00:00 +0100"))

    assert isinstance(verdict, Wait)
    assert verdict.until_ms == _at("2026-03-29 03:00:00 +0200")


def test_a_window_is_read_on_the_wall_clock_in_both_passes_of_a_repeated_hour() -> None:
    window = TimeRange(start="01:30", end="01:45", time_zone="America/New_York")
    schedule = _schedule(window)

    first_pass = _check(schedule, _at("2026-11-01 01:35:00 -0400"))
    between = _check(schedule, _at("2026-11-01 01:10:00 -0500"))
    second_pass = _check(schedule, _at("2026-11-01 01:35:00 -0500"))

    assert first_pass == Met()
    assert isinstance(between, Wait)
    assert between.until_ms == _at("2026-11-01 01:30:00 -0500")
    assert second_pass == Met()


def test_a_window_without_a_zone_is_read_in_the_schedules() -> None:
    window = TimeRange(start="22:00", end="06:00")
    schedule = _schedule(window, zone="America/New_York")

    verdict = _check(schedule, _at("2026-06-01 21:00:00 -0400"))

    assert isinstance(verdict, Wait)
    assert verdict.until_ms == _at("2026-06-01 22:00:00 -0400")


def test_a_window_that_aborts_aborts_outside_it() -> None:
    window = NIGHT.model_copy(update={"wait_until_met": False})

    verdict = _check(_schedule(window), _at("2026-06-01 12:00:00 +0200"))

    assert isinstance(verdict, Abort)
    assert "outside the window 22:00-06:00 (Europe/Berlin)" in verdict.reason


FIRST = _at("2026-06-01 10:00:00 +0000")
# (checked at, verdict): a 15-minute delay counted from the job's first event.
DELAYS = [
    (FIRST, Wait(FIRST + 15 * MINUTE, False, "")),
    (FIRST + 15 * MINUTE - 1, Wait(FIRST + 15 * MINUTE, False, "")),
    (FIRST + 15 * MINUTE, Met()),
    (FIRST + 2 * HOUR, Met()),
]


@pytest.mark.parametrize(("now", "expected"), DELAYS)
def test_a_delay_waits_until_its_time_after_the_first_event(now: int, expected: Verdict) -> None:
    verdict = _check(_schedule(Delay(millis=15 * MINUTE)), now, first=FIRST)

    if isinstance(expected, Wait):
        assert isinstance(verdict, Wait)
        assert (verdict.until_ms, verdict.on_run_end) == (expected.until_ms, False)
    else:
        assert verdict == expected


ENDED = _at("2026-06-01 10:00:00 +0000")
COMPLETED = FinishedRun(end_ms=ENDED, status=RunStatus.COMPLETED)
FAILED = FinishedRun(end_ms=ENDED + 30 * MINUTE, status=RunStatus.FAILED)
SIX_HOURS = LastRun(millis=6 * HOUR)
SIX_HOURS_WAITING = LastRun(millis=6 * HOUR, wait_until_met=True)

# (constraint, context, checked at, expected): "since the last run" counts from the end of the
# last COMPLETED run; failed and killed runs do not count; an active run is not met.
LAST_RUNS = [
    (SIX_HOURS, {}, ENDED, Met()),
    (SIX_HOURS, {"last_run": COMPLETED}, ENDED + 6 * HOUR - 1, Abort("")),
    (SIX_HOURS, {"last_run": COMPLETED}, ENDED + 6 * HOUR, Met()),
    (SIX_HOURS_WAITING, {"last_run": COMPLETED}, ENDED + HOUR, Wait(ENDED + 6 * HOUR, False, "")),
    (SIX_HOURS, {"last_run": FAILED}, ENDED + HOUR, Met()),
    (SIX_HOURS, {"last_run": FAILED, "last_completed": COMPLETED}, ENDED + HOUR, Abort("")),
    (
        SIX_HOURS_WAITING,
        {"last_run": FAILED, "last_completed": COMPLETED},
        ENDED + HOUR,
        Wait(ENDED + 6 * HOUR, False, ""),
    ),
    (SIX_HOURS, {"last_run": FAILED, "last_completed": COMPLETED}, ENDED + 6 * HOUR, Met()),
    (SIX_HOURS, {"active_runs": 1, "last_completed": COMPLETED}, ENDED + 9 * HOUR, Abort("")),
    (SIX_HOURS_WAITING, {"active_runs": 1}, ENDED, Wait(None, True, "")),
]


@pytest.mark.parametrize(("rule", "context", "now", "expected"), LAST_RUNS)
def test_the_time_since_the_last_run_counts_from_the_last_completed_runs_end(
    rule: LastRun, context: dict[str, object], now: int, expected: Verdict
) -> None:
    verdict = _check(_schedule(rule), now, **context)

    assert type(verdict) is type(expected)
    if isinstance(expected, Wait):
        assert isinstance(verdict, Wait)
        assert (verdict.until_ms, verdict.on_run_end) == (expected.until_ms, expected.on_run_end)


CONCURRENCY = [
    (Concurrency(max_concurrency=2), 0, Met()),
    (Concurrency(max_concurrency=2), 1, Met()),
    (Concurrency(max_concurrency=2), 2, Abort("")),
    (Concurrency(max_concurrency=2, wait_until_met=True), 2, Wait(None, True, "")),
    (Concurrency(max_concurrency=1), 3, Abort("")),
]


@pytest.mark.parametrize(("rule", "active", "expected"), CONCURRENCY)
def test_concurrency_counts_the_active_runs_of_the_program(
    rule: Concurrency, active: int, expected: Verdict
) -> None:
    verdict = _check(_schedule(rule), FIRST, active_runs=active)

    assert type(verdict) is type(expected)
    if isinstance(verdict, Wait):
        assert (verdict.until_ms, verdict.on_run_end) == (None, True)
        assert "2 run(s) of program 'report' active, at most 2 allowed" in verdict.reason


def test_several_waits_are_checked_again_at_the_latest_of_their_instants() -> None:
    schedule = _schedule(
        TimeRange(start="22:00", end="23:00"),
        Delay(millis=2 * HOUR),
        Concurrency(max_concurrency=1, wait_until_met=True),
    )
    now = _at("2026-06-01 21:30:00 +0000")

    verdict = _check(schedule, now, active_runs=1)

    assert isinstance(verdict, Wait)
    assert verdict.until_ms == now + 2 * HOUR
    assert verdict.on_run_end


def test_any_abort_wins_over_waits_before_it() -> None:
    schedule = _schedule(NIGHT, SIX_HOURS)

    verdict = _check(schedule, _at("2026-06-01 12:00:00 +0200"), last_run=COMPLETED)

    assert isinstance(verdict, Abort)
    assert "ended at 2026-06-01T10:00:00.000+00:00, less than 21600000 ms ago" in verdict.reason


def test_no_constraints_are_met() -> None:
    assert _check(_schedule(), FIRST, active_runs=5) == Met()
