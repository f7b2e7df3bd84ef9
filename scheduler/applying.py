"""Waiting for a worker to apply a change sent through the log (a schedule change, a batch
configuration load), and saying so when it takes longer than a worker would."""

from __future__ import annotations

import time
from collections.abc import Callable

SAY_AFTER_S = 3.0
"""A worker applies a change within a second: a wait this long is said, once, so a user does
not take it for a hang."""


class ApplyWait:
    """A wait of `wait_s` for a change to be applied; `say(seconds_left)` once it lasted
    `SAY_AFTER_S`."""

    def __init__(self, wait_s: float, say: Callable[[float], None]) -> None:
        self._began = time.monotonic()
        self._deadline = self._began + wait_s
        self._say: Callable[[float], None] | None = say

    def over(self) -> bool:
        """Whether the wait is over (it then fails); says that it waits when it is time to."""
        now = time.monotonic()
        if now >= self._deadline:
            return True
        if self._say is not None and now - self._began >= SAY_AFTER_S:
            say, self._say = self._say, None
            say(self._deadline - now)
        return False
