"""The fire index and its ticks (scheduler/schedules/fires.py), driven by the harness's stepped
clock: indexed schedules fire through one tick per instant and shard, exactly once, and a
change racing a tick wins."""

from __future__ import annotations

import pytest

from scheduler.model import from_epoch_ms
from scheduler.schedules import Concurrency, Or, Schedule, Time
from scheduler.schedules.abc import ScheduleRecord
from scheduler.schedules.fires import ENROLL_MARGIN_MS, FIRE_SHARDS, indexed, shard_of
from tests.schedules.harness import T0, Harness

MIN = 60_000
HOUR = 60 * MIN


def hourly(name: str = "hourly", program: str = "clean", **kw: object) -> Schedule:
    return Schedule(name=name, program=program, trigger=Time(cron="5 * * * *"), **kw)


def ops(harness: Harness) -> list[str]:
    return sorted(str(t.data["op"]) for t in harness.client.pending.values())


def test_only_a_lone_cron_without_constraints_is_indexed() -> None:
    assert indexed(hourly())
    assert not indexed(hourly(constraints=(Concurrency(max_concurrency=1),)))
    either = Or(triggers=(Time(cron="5 * * * *"), Time(cron="7 * * * *")))
    assert not indexed(Schedule(name="either", program="clean", trigger=either))


def test_an_enabled_lone_cron_waits_as_an_index_row_and_a_tick_not_a_fire_task(
    harness: Harness,
) -> None:
    harness.create_enabled(hourly())
    assert ops(harness) == ["tick"]
    rows = harness.store.fires(T0 + 5 * MIN, shard_of("hourly"))
    assert [(r.name, r.cron, r.revision) for r in rows] == [
        ("hourly", 0, harness.record("hourly").revision)
    ]


def test_a_fire_nearer_than_the_margin_gets_its_own_fire_task(harness: Harness) -> None:
    harness.clock.now = T0 + 5 * MIN - ENROLL_MARGIN_MS + 1
    harness.create_enabled(hourly())
    assert ops(harness) == ["fire"]
    harness.advance_to(T0 + HOUR + 6 * MIN)
    fires = [t.scheduled_ms for t in harness.client.launches]
    assert fires == [T0 + 5 * MIN, T0 + HOUR + 5 * MIN]
    assert "tick" in ops(harness)  # the fire task put the next fire in the index
    assert "fire" not in ops(harness)


def test_schedules_sharing_an_instant_fire_through_one_tick_per_shard(harness: Harness) -> None:
    names = [f"s{i:02d}" for i in range(40)]
    for name in names:
        harness.create_enabled(hourly(name))
    ran = harness.advance_to(T0 + 5 * MIN)
    ticks = [t for t in ran if t.data["op"] == "tick"]
    assert len(ticks) == len({shard_of(n) for n in names}) <= FIRE_SHARDS
    assert not [t for t in ran if t.data["op"] == "fire"]
    launched = sorted(t.data["system"]["schedule"] for t in harness.client.launches)
    assert launched == names
    assert all(t.scheduled_ms == T0 + 5 * MIN for t in harness.client.launches)
    for name in names:
        record = harness.record(name)
        assert record.last_fires == {"0": T0 + 5 * MIN}
        assert record.next_fires == {"0": T0 + HOUR + 5 * MIN}
        assert harness.store.jobs(name)[-1].state.value == "PENDING_LAUNCH"
    assert harness.store.fires(T0 + 5 * MIN, shard_of("s00")) == []


@pytest.mark.parametrize("dies_in", ["put_jobs", "replace_many", "delete_fires"])
def test_a_tick_run_again_after_a_crash_launches_each_fire_once(
    harness: Harness, dies_in: str
) -> None:
    harness.create_enabled(hourly())
    tick = next(t for t in harness.client.pending.values() if t.data["op"] == "tick")
    harness.clock.now = tick.scheduled_ms
    real = getattr(harness.store, dies_in)

    def killed(*args: object, **kw: object) -> None:
        raise OSError("killed")

    setattr(harness.store, dies_in, killed)
    with pytest.raises(OSError):
        harness.executor.handle(tick)
    setattr(harness.store, dies_in, real)
    harness.executor.handle(tick)  # the engine runs the task again
    harness.executor.handle(tick)  # and once more, after it completed
    keys = {(t.data["program"], t.data["request_key"]) for t in harness.client.launches}
    assert len(keys) == 1
    assert len(harness.store.jobs("hourly")) == 1
    assert harness.record("hourly").next_fires == {"0": T0 + HOUR + 5 * MIN}
    harness.advance_to(T0 + HOUR + 5 * MIN)
    keys = {t.data["request_key"] for t in harness.client.launches}
    assert len(keys) == 2


@pytest.mark.parametrize("action", ["disable", "update", "delete"])
def test_a_change_racing_a_tick_wins_and_leaves_no_stale_fire(
    harness: Harness, action: str
) -> None:
    harness.create_enabled(hourly())
    store, real = harness.store, harness.store.replace_many

    def raced(changes: list[tuple[str, ScheduleRecord]]) -> set[str]:
        # The schedule's own queue applies the change between the tick's read and its write.
        store.replace_many = real  # type: ignore[method-assign]
        harness.change("hourly", action, hourly(program="clean2") if action == "update" else None)
        return real(changes)

    store.replace_many = raced  # type: ignore[method-assign]
    harness.advance_to(T0 + 5 * MIN)
    assert len(harness.client.launches) == 1  # decided before the change landed
    harness.advance_to(T0 + 3 * HOUR)
    if action == "delete":
        assert harness.store.get("hourly") is None
        assert len(harness.client.launches) == 1
        return
    record = harness.record("hourly")
    if action == "disable":
        assert not record.enabled and record.next_fires == {}
        assert len(harness.client.launches) == 1
    else:  # the update's own fires, at its new revision, and none of the old one's
        assert record.schedule.program == "clean2"
        later = [t.data["program"] for t in harness.client.launches[1:]]
        assert later == ["clean2", "clean2"]  # at 01:05 and 02:05


def test_a_late_tick_hands_its_fire_to_the_schedule_for_the_catch_up(harness: Harness) -> None:
    harness.create_enabled(hourly())
    harness.clock.now = T0 + 2 * HOUR + 30 * MIN  # no worker ran for two hours and a half
    ran = harness.run_due()
    assert [t.data["op"] for t in ran] == ["tick", "fire"]
    # The default catch-up policy (ALL) runs each missed fire, oldest first.
    logical = [t.data["system"]["logical_time"] for t in harness.client.launches]
    fires = [T0 + 5 * MIN, T0 + HOUR + 5 * MIN, T0 + 2 * HOUR + 5 * MIN]
    assert logical == [from_epoch_ms(f).isoformat() for f in fires]
    assert harness.record("hourly").next_fires == {"0": T0 + 3 * HOUR + 5 * MIN}
