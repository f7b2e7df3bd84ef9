"""The worker's lease on its partitions: no attempt starts once the group may have moved them.

A process stopped past the session timeout (SIGSTOP, a frozen VM) has lost its partitions but
does not know it yet when it resumes: its timer thread would start every task that fell due some
200 ms before the poll delivers the revocation. So the poll loop stamps the lease after every
poll (`confirm`), and attempts start only while the last stamp is younger than `term_s`. After a
lapse the lease stays lapsed for `settle_s` more of real polling, time for the revocation to
arrive; tasks due meanwhile start when it holds again (`when_held`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from scheduler.engine.clock import SYSTEM_CLOCK, Clock


class Lease:
    """Whether the worker may start attempts (see the module); thread-safe."""

    def __init__(
        self,
        *,
        term_s: float | None,
        settle_s: float = 0.0,
        clock: Clock = SYSTEM_CLOCK,
        real_monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if term_s is not None and term_s <= 0:
            raise ValueError(
                f"a lease term must be positive, got {term_s} s: give the session timeout minus "
                "a margin, or None for a log without group sessions"
            )
        self.term_s = term_s
        """How long after its last stamp the lease holds (None: always held)."""
        self.settle_s = settle_s
        self._clock = clock
        self._real = real_monotonic
        self._lock = threading.Lock()
        self._stamped = clock.monotonic()
        self._settling_since: float | None = None
        self._waiters: list[Callable[[], None]] = []

    def confirm(self) -> None:
        """A poll returned: the consumer had its chance to hear from the group."""
        if self.term_s is None:
            return
        now = self._clock.monotonic()
        with self._lock:
            lapsed = now - self._stamped > self.term_s
            self._stamped = now
            if lapsed:
                self._settling_since = self._real()
            if self._settling_since is not None:
                if self._real() - self._settling_since < self.settle_s:
                    return
                self._settling_since = None
            waiters, self._waiters = self._waiters, []
        for wake in waiters:
            wake()

    def held(self) -> bool:
        """Whether an attempt may start now."""
        if self.term_s is None:
            return True
        with self._lock:
            return (
                self._settling_since is None
                and self._clock.monotonic() - self._stamped <= self.term_s
            )

    def when_held(self, wake: Callable[[], None]) -> None:
        """Call `wake` (once, on the poll thread) at the next stamp that finds the lease held."""
        with self._lock:
            self._waiters.append(wake)

    def age_s(self) -> float:
        """Seconds of the worker's clock since the last stamp (for logs and probes)."""
        with self._lock:
            return self._clock.monotonic() - self._stamped


ALWAYS_HELD = Lease(term_s=None)
"""The lease of a log without group sessions (and the default of a partition's context)."""


def lease_term_s(session_timeout_s: float, heartbeat_s: float) -> float:
    """The lease term for a consumer group session: the session timeout less two heartbeats
    (at least half the session), so the lease lapses before the coordinator can give the
    partitions away."""
    return max(session_timeout_s / 2, session_timeout_s - 2 * heartbeat_s)
