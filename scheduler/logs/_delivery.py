"""DeliveryFuture: the future `schedule_task` returns, cheap enough for one per record.

A `concurrent.futures.Future` builds a `threading.Condition` (a lock, a deque of waiters) when it
is created and takes it on every state change. `schedule_task` makes one future per task at tens
of thousands of tasks a second, most of them resolved before anyone looks at them, and measured
that way the futures cost more than producing the records to Kafka (and their garbage-collected
parts slowed every collection while 50,000 of them were pending). This subclass creates the
condition only when a thread actually waits or registers a callback; a future resolved before
that is finished under one module-wide lock and answers `done`/`result`/`exception` without one.

It keeps `Future`'s public behaviour (tests/logs/test_delivery_future.py checks it against
waiting threads, callbacks, `wait` and `as_completed`) and relies on its private fields
(`_state`, `_result`, `_exception`, `_condition`, `_waiters`, `_done_callbacks`), which have been
the same from Python 3.8 to 3.13. It starts RUNNING: a record handed to the log cannot be
cancelled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import FINISHED, RUNNING
from typing import Any

_LAZY = threading.Lock()
"""Guards creating a future's condition against the future being resolved at the same time."""


class DeliveryFuture(Future[int]):
    """A running future whose condition exists only once somebody waits on it."""

    # Slots keep Future's instance dict from being built for a future nobody waits on: one
    # small object per record (the garbage collector walks every pending one, again and again
    # while a caller holds many: measured, its size sets most of their cost). `_waiters` and
    # `_done_callbacks` are only touched under the condition, so they are made with it, in the
    # instance dict of the few futures somebody waits on.
    __slots__ = ("_cond", "_exception", "_on_success", "_result", "_state")

    def __init__(self, on_success: Callable[[], object] | None = None) -> None:
        # Future.__init__ is skipped on purpose: it builds the condition this class defers.
        self._cond: threading.Condition | None = None
        self._state = RUNNING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._on_success = on_success

    @property  # Future's plain attribute, made lazy
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _LAZY:
                cond = self._cond
                if cond is None:
                    self._waiters: list[Any] = []
                    self._done_callbacks: list[Callable[[Future[int]], object]] = []
                    cond = self._cond = threading.Condition()
        return cond

    def set_result(self, result: int) -> None:
        if self._on_success is not None:
            self._on_success()  # before any waiter wakes, so a caller sees it counted
        if not self._finish_unobserved(result, None):
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._finish_unobserved(None, exception):
            super().set_exception(exception)

    def _resolve(self, result: int) -> None:
        """Resolve from the one delivery report a record gets: the per-record fast path.

        No lock: the state is written before the condition is looked at, and an observer creates
        the condition before it looks at the state, so at least one of the two sees the other
        (the GIL orders them). Only for a caller that finishes each future exactly once.
        """
        if self._on_success is not None:
            self._on_success()  # before any waiter wakes, so a caller sees it counted
        self._result = result
        self._state = FINISHED
        if self._cond is not None:
            self._wake_observers()

    def _wake_observers(self) -> None:
        """What `Future.set_result` does after writing the state: waiters, then callbacks."""
        with self._condition:
            for waiter in self._waiters:
                waiter.add_result(self)
            self._condition.notify_all()
        self._invoke_callbacks()  # type: ignore[attr-defined]

    def _finish_unobserved(self, result: Any, exception: BaseException | None) -> bool:
        """Finish without a condition if nobody has asked for one yet; False if somebody has."""
        if self._cond is not None:
            return False
        with _LAZY:
            if self._cond is not None:
                return False
            finished_already = self._state == FINISHED
            if not finished_already:
                self._result, self._exception, self._state = result, exception, FINISHED
        if finished_already:  # raised outside the lock: the future's repr takes it
            raise InvalidStateError(f"{self!r} is already finished")
        return True

    # Finished futures answer without creating a condition (the state never leaves FINISHED).

    def done(self) -> bool:
        # RUNNING or FINISHED, never cancelled: nothing to ask the condition for. A thread that
        # serves delivery reports until a future is done asks this in a loop (Future.done would
        # build the condition of every future it waits on).
        return self._state == FINISHED

    def result(self, timeout: float | None = None) -> int:
        if self._state == FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:
            return self._exception
        return super().exception(timeout)
