"""StopDeadline: how long a stop lets running attempts finish, and the way to end it early.

One object is handed to every partition's shutdown, so one `end_now` (a second Ctrl-C) cancels
the attempts of them all, including those whose shutdown has not begun yet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: How often a wait looks whether the deadline was ended early.
LOOK_S = 0.05


class StopDeadline:
    """A point in time `seconds` from its creation, which `end_now` brings forward to now."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._ends = clock() + seconds
        self._ended = threading.Event()

    def end_now(self) -> None:
        """Give the waiting attempts no more time (any thread)."""
        self._ended.set()

    @property
    def ended_early(self) -> bool:
        """Whether `end_now` was called."""
        return self._ended.is_set()

    def remaining(self) -> float:
        """Seconds left; 0 once passed or ended."""
        if self._ended.is_set():
            return 0.0
        return max(0.0, self._ends - self._clock())

    def wait_for(self, done: threading.Event) -> bool:
        """Block until `done` is set (True) or the deadline passes or is ended (False)."""
        while not done.is_set():
            left = self.remaining()
            if left <= 0:
                return done.is_set()
            done.wait(min(left, LOOK_S))
        return True
