"""Properties that must hold for every instant and every event sequence, not only the tables'.
Hypothesis runs derandomized, so a run is repeatable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.model import from_epoch_ms, to_epoch_ms
from scheduler.schedules import (
    And,
    Or,
    Partition,
    PartitionsAdded,
    ProgramStatus,
    RunEnded,
    RunStatus,
    Time,
    TimeFired,
    parse_cron,
)
from scheduler.schedules.events import is_satisfied

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe", "UTC"]
EXPRESSIONS = [
    "*/7 * * * *",
    "30 2 * * *",
    "0 */2 * * *",
    "15 30 1 * * *",
    "0 0 * * *",
    "0 0/20 * * * ?",
    "*/45 * 2 * * *",
]
DERANDOMIZED = settings(derandomize=True, max_examples=200, deadline=None)


@cache
def _transitions(zone: str) -> tuple[int, ...]:
    """The instants of 2026 at which `zone` changes its offset (to the half hour)."""
    tz = ZoneInfo(zone)
    found = []
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    previous = moment.astimezone(tz).utcoffset()
    while moment.year == 2026:
        moment += timedelta(minutes=30)
        offset = moment.astimezone(tz).utcoffset()
        if offset != previous:
            found.append(to_epoch_ms(moment))
            previous = offset
    return tuple(found) or (to_epoch_ms(datetime(2026, 3, 29, tzinfo=UTC)),)


@st.composite
def _near_a_change(draw: st.DrawFn) -> tuple[str, str, int]:
    zone = draw(st.sampled_from(ZONES))
    change = draw(st.sampled_from(_transitions(zone)))
    around = draw(st.integers(-36 * 3_600_000, 36 * 3_600_000))
    return zone, draw(st.sampled_from(EXPRESSIONS)), change + around


@DERANDOMIZED
@given(_near_a_change())
def test_next_and_previous_fires_bracket_every_instant(case: tuple[str, str, int]) -> None:
    zone, expression, instant = case
    cron = parse_cron(expression, zone)

    after = cron.next_after(instant)
    before = cron.previous_before(instant)

    assert before < instant < after
    # Nothing fires strictly between `before` and `instant`, nor between `instant` and `after`.
    assert cron.previous_before(after) in (before, instant)
    assert cron.next_after(before) in (instant, after)


@DERANDOMIZED
@given(_near_a_change())
def test_no_wall_time_fires_twice_and_fires_only_move_forward(case: tuple[str, str, int]) -> None:
    zone, expression, instant = case
    cron = parse_cron(expression, zone)
    tz = ZoneInfo(zone)

    fires = cron.next_fires(instant, 40)
    walls = [from_epoch_ms(fire).astimezone(tz).replace(tzinfo=None) for fire in fires]

    assert fires == sorted(set(fires))
    assert len(set(walls)) == len(walls)


LEAVES = [
    Time(cron="0 * * * *"),
    Partition(dataset="a", num_partitions=2),
    Partition(dataset="b", num_partitions=1),
    ProgramStatus(program="etl", statuses=frozenset({RunStatus.COMPLETED, RunStatus.KILLED})),
]
EVENTS = [
    TimeFired(cron="0 * * * *", time_zone="UTC", logical_time_ms=0),
    TimeFired(cron="0 4 * * *", time_zone="UTC", logical_time_ms=0),
    PartitionsAdded(dataset="a", count=1),
    PartitionsAdded(dataset="b", count=3),
    RunEnded(program="etl", run_id="r", status=RunStatus.FAILED),
    RunEnded(program="etl", run_id="r", status=RunStatus.KILLED),
]
TRIGGERS = st.recursive(
    st.sampled_from(LEAVES),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda ts: And(triggers=tuple(ts))),
        st.lists(inner, min_size=1, max_size=3).map(lambda ts: Or(triggers=tuple(ts))),
    ),
    max_leaves=6,
)


@DERANDOMIZED
@given(TRIGGERS, st.lists(st.sampled_from(EVENTS), max_size=8), st.sampled_from(EVENTS))
def test_more_events_never_unsatisfy_a_trigger(
    trigger: object, events: list[object], more: object
) -> None:
    before = is_satisfied(trigger, tuple(events), "UTC")  # type: ignore[arg-type]
    after = is_satisfied(trigger, (*events, more), "UTC")  # type: ignore[arg-type]

    assert after or not before
