"""The worker's lease on its partitions: no attempt starts once the group may have moved them.

A worker owns its partitions only while its consumer group session lives. A process stopped
(SIGSTOP, a VM frozen, a long GC pause) past the session timeout has lost them to another worker,
but does not know it yet when it resumes: its timer thread runs first and would start every task
that fell due meanwhile, some 200 ms before the consumer's poll delivers the revocation. For those
milliseconds two workers would run one ordering id at once.

So the poll loop stamps the lease after every poll that returns (`confirm`), and a partition
starts an attempt only while the lease is `held`: the last stamp is younger than `term_s` (the
session timeout minus a margin) on the worker's clock. Once a stamp comes after a lapse, the lease
stays lapsed for `settle_s` more of real time while the loop keeps polling: time for a heartbeat
to reach the coordinator and for the poll to deliver the revocation (or confirm the assignment),
before anything starts. Tasks that fell due meanwhile wait, and start when it is held again
(`when_held`), or leave with their partition.
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
        """After a lapse, real seconds of polling before it holds again."""
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
