"""Bounded retries with exponential backoff and full jitter, for transient backend errors: a
blink (a coordinator timing out, a replica restarting) costs a moment, a real outage surfaces
within seconds as `BackendUnavailableError`, and full jitter keeps a worker's partitions from
retrying in lockstep. The caller says which exceptions are transient."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from scheduler.errors import BackendUnavailableError

T = TypeVar("T")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry a transient error."""

    attempts: int = 5
    """Tries in all, the first included."""
    base_delay_s: float = 0.05
    """Cap of the delay before the first retry; it doubles for each further retry."""
    max_delay_s: float = 2.0
    """No single delay exceeds this."""

    def delays(self) -> Iterator[float]:
        """The sleep before each retry: `attempts - 1` values."""
        for retry in range(self.attempts - 1):
            yield random.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**retry))


def call_with_retries(
    operation: Callable[[], T],
    *,
    policy: RetryPolicy,
    transient: tuple[type[BaseException], ...],
    describe: Callable[[BaseException], str],
    sleep: Callable[[float], None] = time.sleep,
    announce: Callable[[BaseException, int, float], None] | None = None,
) -> T:
    """Return `operation()`, retrying on `transient` errors; when the policy is exhausted raise
    `BackendUnavailableError(describe(last_error))` chained to the last error. Other errors
    propagate at once: retrying a bad query or a bug only hides it. Before each retry,
    `announce(error, tries_made, seconds_the_try_took)` if given (tries slow enough that a user
    would otherwise wait without a word), else a DEBUG line."""
    delays = policy.delays()
    tries = 0
    while True:
        tries += 1
        started = time.monotonic()
        try:
            return operation()
        except transient as error:
            delay = next(delays, None)
            if delay is None:
                raise BackendUnavailableError(describe(error)) from error
            if announce is not None:
                announce(error, tries, time.monotonic() - started)
            else:
                log.debug("transient backend error, retrying in %.3f s: %r", delay, error)
            sleep(delay)
