"""Cron fires missed while no worker ran: which run when the engine comes back."""

from __future__ import annotations

import pytest

from scheduler.schedules import CatchUp, Schedule, Time, catchup, fires_to_run, parse_schedule

HOUR = 3_600_000
TEN = 1_780_048_800_000  # 2026-05-29T10:00:00Z


def _schedule(mode: CatchUp, timeout: int = 86_400_000) -> Schedule:
    return Schedule(
        name="s",
        program="p",
        trigger=Time(cron="0 * * * *"),
        catch_up=mode,
        timeout_millis=timeout,
    )


def _hours(*offsets: int) -> list[int]:
    return [TEN + offset * HOUR for offset in offsets]


# The fire at 10:00 was the last handled; the fleet comes back at `now`.
CASES = [
    (CatchUp.SKIP, TEN + 5 * HOUR + 20 * 60_000, []),
    (CatchUp.ONCE, TEN + 5 * HOUR + 20 * 60_000, _hours(5)),
    (CatchUp.ALL, TEN + 5 * HOUR + 20 * 60_000, _hours(1, 2, 3, 4, 5)),
    # A fire at most a minute late is on time under every policy.
    (CatchUp.SKIP, TEN + 5 * HOUR + 60_000, _hours(5)),
    (CatchUp.SKIP, TEN + 5 * HOUR + 60_001, []),
    (CatchUp.ONCE, TEN + HOUR + 30_000, _hours(1)),
    (CatchUp.ALL, TEN + HOUR + 30_000, _hours(1)),
    # Nothing was missed.
    (CatchUp.ALL, TEN + 30 * 60_000, []),
]


@pytest.mark.parametrize(("mode", "now", "expected"), CASES)
def test_missed_fires_run_as_the_schedules_policy_says(
    mode: CatchUp, now: int, expected: list[int]
) -> None:
    schedule = _schedule(mode)

    assert fires_to_run(schedule, schedule.crons()[0], TEN, now) == expected


def test_all_goes_back_no_further_than_the_schedules_timeout() -> None:
    schedule = _schedule(CatchUp.ALL, timeout=2 * HOUR)

    fires = fires_to_run(schedule, schedule.crons()[0], TEN - 48 * HOUR, TEN + 5 * HOUR)

    assert fires == _hours(3, 4, 5)


def test_all_runs_at_most_the_newest_max_fires(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catchup, "MAX_FIRES", 3)
    schedule = Schedule(
        name="s", program="p", trigger=Time(cron="* * * * * *"), catch_up=CatchUp.ALL
    )

    fires = fires_to_run(schedule, schedule.crons()[0], TEN, TEN + HOUR)

    assert fires == [TEN + HOUR - 2000, TEN + HOUR - 1000, TEN + HOUR]


def test_the_policy_is_read_from_json_and_defaults_to_all() -> None:
    base = {"name": "s", "program": "p", "trigger": {"type": "TIME", "cronExpression": "@daily"}}

    assert parse_schedule(base).catch_up is CatchUp.ALL
    assert parse_schedule({**base, "catchUp": "ONCE"}).catch_up is CatchUp.ONCE
    assert parse_schedule({**base, "catchUp": "ONCE"}).to_json()["catchUp"] == "ONCE"
