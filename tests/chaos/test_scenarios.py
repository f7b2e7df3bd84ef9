"""The timing of a scenario's rounds against its load (no cluster: a stand-in run, a stepped
clock)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduler.chaos.scenarios import OVERRUN_S, _rounds


@dataclass
class SteppedClock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class StandInLoad:
    clock: SteppedClock
    duration_s: float
    stopped_at: float | None = None

    @property
    def running(self) -> bool:
        return self.stopped_at is None and self.clock.now < self.duration_s

    def stop(self) -> None:
        if self.stopped_at is None:
            self.stopped_at = self.clock.now


@dataclass
class StandInRun:
    clock: SteppedClock
    workers: list[str] = field(default_factory=list)
    load: StandInLoad | None = None

    def start(self, workers: int = 2) -> None:
        self.workers = [f"w{n}" for n in range(1, workers + 1)]

    def start_load(self, duration_s: float) -> StandInLoad:
        self.load = StandInLoad(self.clock, duration_s)
        return self.load


def test_a_round_longer_than_the_duration_keeps_the_load_running_until_its_faults_end() -> None:
    clock = SteppedClock()
    run = StandInRun(clock)
    faults: list[tuple[float, float]] = []

    def six_slow_restarts(n: int) -> None:  # rolling-restart's round took 8 min at 120 s
        for _ in range(6):
            began = clock.now
            clock.sleep(80)
            faults.append((began, clock.now))

    rounds = _rounds(run, 120, six_slow_restarts, clock=clock, sleep=clock.sleep)

    assert rounds == 1
    assert run.load is not None and run.load.stopped_at == 5 + 6 * 80
    assert all(end <= run.load.stopped_at for _, end in faults)
    assert run.workers == ["w1", "w2"]


def test_rounds_begin_only_within_the_duration_and_the_load_ends_with_the_last() -> None:
    clock = SteppedClock()
    run = StandInRun(clock)
    starts: list[float] = []

    def a_round(n: int) -> None:
        starts.append(clock.now)
        clock.sleep(23)

    rounds = _rounds(run, 180, a_round, clock=clock, sleep=clock.sleep)

    # After the 5 s of quiet work, rounds at 5, 28, ..., 166; the one begun at 166 ends at 189.
    assert starts == [5 + 23 * n for n in range(8)]
    assert rounds == 8
    assert run.load is not None and run.load.stopped_at == 189


def test_the_rounds_stop_when_the_load_reaches_its_bound() -> None:
    clock = SteppedClock()
    run = StandInRun(clock)

    def a_round_that_hangs(n: int) -> None:
        clock.sleep(OVERRUN_S + 200)

    rounds = _rounds(run, 60, a_round_that_hangs, clock=clock, sleep=clock.sleep)

    assert rounds == 1  # no second round once the load has run out by itself
    assert run.load is not None and run.load.duration_s == 60 + OVERRUN_S


def test_the_load_stops_when_a_round_fails() -> None:
    clock = SteppedClock()
    run = StandInRun(clock)

    def a_failing_round(n: int) -> None:
        clock.sleep(10)
        raise RuntimeError("the victim never came back")

    with pytest.raises(RuntimeError, match="never came back"):
        _rounds(run, 120, a_failing_round, clock=clock, sleep=clock.sleep)
    assert run.load is not None and run.load.stopped_at == 15
