"""The engine's clock and timer service: time a test steps, timers that follow it."""

from __future__ import annotations

import threading

import pytest

from scheduler.engine.clock import SYSTEM_CLOCK, SteppedClock, monotonic_at
from scheduler.engine.timers import TimerService


def test_a_stepped_clock_stands_still_until_advanced_then_moves_by_exactly_the_step():
    clock = SteppedClock(start_ms=1_000_000)
    assert clock.now_ms() == 1_000_000 and clock.monotonic() == 0
    clock.advance(1.5)
    assert clock.now_ms() == 1_001_500 and clock.monotonic() == 1.5


def test_a_stepped_clock_refuses_to_go_back():
    with pytest.raises(ValueError, match="only moves forward"):
        SteppedClock().advance(-1)


def test_a_timer_on_a_stepped_clock_fires_once_the_clock_passes_its_deadline_not_before():
    clock = SteppedClock(start_ms=0)
    timers = TimerService(clock=clock)
    fired = threading.Event()
    try:
        timers.call_at_ms(3_600_000, fired.set)  # an hour from the clock's now
        clock.advance(3599.999)
        assert not fired.wait(0.1)
        clock.advance(0.001)
        assert fired.wait(5)
    finally:
        timers.stop()


def test_timers_fire_in_deadline_order_when_one_step_passes_them_all():
    clock = SteppedClock(start_ms=0)
    timers = TimerService(clock=clock)
    order: list[int] = []
    done = threading.Event()
    try:
        for delay in (3, 1, 2):
            timers.call_later(delay, lambda delay=delay: order.append(delay))
        timers.call_later(4, done.set)
        clock.advance(10)
        assert done.wait(5)
        assert order == [1, 2, 3]
    finally:
        timers.stop()


def test_a_cancelled_timer_does_not_fire():
    clock = SteppedClock(start_ms=0)
    timers = TimerService(clock=clock)
    fired, after = threading.Event(), threading.Event()
    try:
        timers.call_later(1, fired.set).cancel()
        timers.call_later(2, after.set)
        clock.advance(5)
        assert after.wait(5) and not fired.is_set()
    finally:
        timers.stop()


def test_the_system_clock_maps_an_epoch_instant_onto_its_monotonic_scale():
    ahead = monotonic_at(SYSTEM_CLOCK.now_ms() + 10_000) - SYSTEM_CLOCK.monotonic()
    assert 9.9 < ahead <= 10.0
