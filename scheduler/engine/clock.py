"""Wall-clock time in epoch milliseconds, the unit tasks are scheduled in."""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def monotonic_at(epoch_ms: int) -> float:
    """The `time.monotonic()` value at which the wall clock will read `epoch_ms`."""
    return time.monotonic() + (epoch_ms - now_ms()) / 1000
