"""Failures that repeat while a store is down, said together once a minute (the caller logs
each partition's first failure itself).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

LOGGED_EVERY_S = 60.0
"""How often repeats are said, at most."""


class RepeatedFailures:
    """Counts repeated failures of partitions and logs them as one line a minute.

    `says` is the line, with `{partitions}`, `{count}`, `{seconds}` and `{error}` in it; a spell
    of failures ends when nothing repeats for two minutes."""

    def __init__(
        self, log: logging.Logger, says: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._log = log
        self._says = says
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._partitions: set[int] = set()
        self._count = 0

    def failed_again(self, partition: int, error: BaseException) -> None:
        now = self._clock()
        with self._lock:
            if self._since is None or now - self._since > 2 * LOGGED_EVERY_S:
                self._since, self._partitions, self._count = now, set(), 0
            self._partitions.add(partition)
            self._count += 1
            if now - self._since < LOGGED_EVERY_S:
                return
            text = self._says.format(
                partitions=sorted(self._partitions),
                count=self._count,
                seconds=now - self._since,
                error=f"{type(error).__name__}: {error}",
            )
            self._since, self._partitions, self._count = now, set(), 0
        self._log.error("%s; this is said once a minute", text, extra={"partition": partition})
