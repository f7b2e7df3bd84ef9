"""The engine's time: one `Clock` a worker hands to its timer service and every partition.

Tasks are scheduled in epoch milliseconds (`now_ms`); waits on a monotonic scale (`monotonic`).
A test gives the worker a `SteppedClock` and moves time itself. `SYSTEM_CLOCK` is the real one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    """What time it is, for the engine, and how long to really wait for clock time to pass."""

    def now_ms(self) -> int:
        """Wall-clock time in epoch milliseconds."""
        ...

    def monotonic(self) -> float:
        """A monotonic reading in seconds (timer deadlines are on this scale)."""
        ...

    def real_wait(self, seconds: float) -> float | None:
        """How long to block (in real seconds) for `seconds` of this clock to pass; None: until
        woken by a `subscribe`d callback (a clock that only moves when stepped)."""
        ...

    def subscribe(self, wake: Callable[[], None]) -> None:
        """Have `wake` called whenever the clock jumps (a timer thread re-reads its deadlines)."""
        ...


class SystemClock:
    """The real clock: `time.time_ns` and `time.monotonic`."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def real_wait(self, seconds: float) -> float | None:
        return seconds

    def subscribe(self, wake: Callable[[], None]) -> None:
        """The system clock never jumps for its readers: nothing to call."""


class SteppedClock:
    """A clock that stands still until `advance` moves it; for tests. It starts at `start_ms`
    (default: now, so tasks enqueued for "now plus a little" pass the client's grace window)."""

    def __init__(self, start_ms: int | None = None) -> None:
        self._start_ms = SYSTEM_CLOCK.now_ms() if start_ms is None else start_ms
        self._elapsed_ms = 0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def now_ms(self) -> int:
        return self._start_ms + self._elapsed_ms

    def monotonic(self) -> float:
        return self._elapsed_ms / 1000

    def real_wait(self, seconds: float) -> float | None:
        return None

    def subscribe(self, wake: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(wake)

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds` (rounded to milliseconds); due timers fire."""
        if seconds < 0:
            raise ValueError(f"a clock only moves forward; advance({seconds}) would go back")
        with self._lock:
            self._elapsed_ms += round(seconds * 1000)
            listeners = list(self._listeners)
        for wake in listeners:
            wake()


SYSTEM_CLOCK = SystemClock()
"""The real clock, the default of every constructor that takes one."""


def monotonic_at(epoch_ms: int, clock: Clock = SYSTEM_CLOCK) -> float:
    """The `clock.monotonic()` value at which `clock.now_ms()` will read `epoch_ms`."""
    return clock.monotonic() + (epoch_ms - clock.now_ms()) / 1000


def now_ms() -> int:
    """The real wall-clock time in epoch milliseconds (code with a clock asks the clock)."""
    return SYSTEM_CLOCK.now_ms()
