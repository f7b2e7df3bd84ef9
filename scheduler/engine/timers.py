"""One timer thread for the whole worker: a heap of deadlines behind a condition variable.

Callbacks run on the timer thread and must be cheap (they tell an actor). Deadlines are read on
the service's `Clock`: a `SteppedClock` in tests fires timers when the test steps it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from scheduler.engine.clock import SYSTEM_CLOCK, Clock, monotonic_at

logger = logging.getLogger(__name__)


class TimerHandle:
    """Returned by `TimerService.call_at`; `cancel()` stops the callback from running."""

    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class TimerService:
    """Runs callbacks at deadlines of its clock, in deadline order, on one daemon thread."""

    def __init__(self, name: str = "scheduler-timers", *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._sequence = itertools.count()
        self._condition = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        clock.subscribe(self._wake)

    def _wake(self) -> None:
        with self._condition:
            self._condition.notify()

    def call_at(self, deadline: float, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback` once `clock.monotonic()` reaches `deadline`."""
        handle = TimerHandle(deadline, callback)
        with self._condition:
            heapq.heappush(self._heap, (deadline, next(self._sequence), handle))
            if self._heap[0][2] is handle:
                self._condition.notify()
        return handle

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback` once `delay_s` seconds of the clock have passed."""
        return self.call_at(self.clock.monotonic() + max(0.0, delay_s), callback)

    def call_at_ms(self, epoch_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback` once the clock reads `epoch_ms` (a task's due time, a retry's)."""
        return self.call_at(monotonic_at(epoch_ms, self.clock), callback)

    def stop(self) -> None:
        with self._condition:
            self._stopped = True
            self._condition.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._stopped:
                    if not self._heap:
                        self._condition.wait()
                        continue
                    wait = self._heap[0][0] - self.clock.monotonic()
                    if wait <= 0:
                        break
                    self._condition.wait(self.clock.real_wait(wait))
                if self._stopped:
                    return
                _, _, handle = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            try:
                handle.callback()
            except Exception:
                logger.debug("timer callback failed", exc_info=True)
