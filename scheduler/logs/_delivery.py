"""DeliveryFuture: the future `schedule_task` returns, cheap enough for one per record.

A `concurrent.futures.Future` builds a `threading.Condition` when it is created, which costs more
than producing its record, and most of these futures resolve before anyone looks at them. So a
DeliveryFuture makes its `Future` part only when something needs it. Until then its outcome is
one field, `_outcome`: None while pending, then the partition (an int) or a `Failed`, written
once under a module-wide lock and read without it (one reference, written once).

The first use of anything else of `Future` (a waiter, `add_done_callback`, `wait`, `repr`) builds
a plain `Future` through its public methods, replays the outcome into it, and moves its fields
here, its condition last (see `_make`), under the same lock; from then on it is a plain
`Future`. The one field named is the condition, which every reader takes first; nothing relies
on the GIL, so it works the same on a free-threaded Python. A record handed to the log cannot be
cancelled: the future is running from the start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from contextlib import AbstractContextManager
from typing import Any, cast

from scheduler import speedups


class Failed:
    """A future's exception, as its `_outcome` holds it."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


_LOCK: AbstractContextManager[object] = (
    threading.Lock() if speedups.native is None else speedups.native.OUTCOME_LOCK
)
"""Guards every DeliveryFuture's own fields, and making its `Future` part. Held for a few field
reads and writes, never while calling out (a callback, a waiter). Where the C path is built, its
lock, which the record's delivery report in C takes too (`scheduler/_speedups.c`)."""


class DeliveryFuture(Future[int]):
    """A running future whose `Future` part is made only once somebody needs more than its
    outcome."""

    # What a future nobody waits on needs; the `Future` part, once made, lives in the dict.
    __slots__ = ("_made", "_on_success", "_outcome")

    def __init__(self, on_success: Callable[[], object] | None = None) -> None:
        # No Future.__init__: `_make` runs it once something needs the condition it builds.
        self._on_success = on_success
        self._made = False
        """Whether the `Future` part exists: from then on, Future's methods hold the state."""
        self._outcome: int | Failed | None = None
        """The result, or the exception in a `Failed`, once settled before the `Future` part was
        made; else None."""

    def __getattr__(self, name: str) -> Any:
        # Called only for an attribute that is missing: before the `Future` part is made, any of
        # those `Future.__init__` sets. Make it, then look again.
        if name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._make()  # or another thread just did
        return object.__getattribute__(self, name)

    def _make(self) -> None:
        """Make the `Future` part and replay the outcome into it, unless it was made already.

        The part is built on a plain `Future` of its own and its fields moved here with the
        condition last: every method of `Future` (and `wait`, `as_completed`) takes the
        condition before it reads anything else, so a thread that finds the condition finds the
        rest. Built here in place, a thread could take the condition as soon as `__init__` set
        it, miss a field not set yet, and wait in `__getattr__` for the lock this thread holds
        while it waits for that condition: both stopped for good."""
        with _LOCK:
            if self._made:
                return
            part: Future[int] = Future()
            part.set_running_or_notify_cancel()
            outcome = self._outcome
            # Nothing waits on a part made just now: no callback runs here.
            if isinstance(outcome, Failed):
                part.set_exception(outcome.error)
            elif outcome is not None:
                part.set_result(outcome)
            fields = vars(part)
            condition = fields.pop("_condition")
            for name, value in fields.items():
                object.__setattr__(self, name, value)
            object.__setattr__(self, "_condition", condition)
            self._made = True

    def _settle(self, outcome: int | Failed) -> bool:
        """Keep the outcome in the future's own fields; False if the `Future` part exists, which
        the caller then resolves (outside the lock: it wakes waiters and runs callbacks)."""
        with _LOCK:
            if self._made:
                return False
            twice = self._outcome is not None
            if not twice:
                self._outcome = outcome
        if twice:  # raised outside the lock: the future's repr makes its `Future` part
            self._already_finished()
        return True

    def _already_finished(self) -> None:
        raise InvalidStateError(f"{self!r} is already finished")

    def set_result(self, result: int) -> None:
        if self._on_success is not None:
            self._on_success()  # before any waiter wakes, so a caller sees it counted
        if not self._settle(result):
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._settle(Failed(exception)):
            super().set_exception(exception)

    # A future settled before anybody needed its `Future` part answers from `_outcome`.

    def done(self) -> bool:
        # Never cancelled, so done is settled; asked in a loop while serving delivery reports.
        if self._outcome is not None:
            return True
        return self._made and super().done()

    def result(self, timeout: float | None = None) -> int:
        outcome = self._outcome
        if outcome is None:
            return super().result(timeout)
        if isinstance(outcome, Failed):
            raise cast(BaseException, outcome.error)
        return outcome

    def exception(self, timeout: float | None = None) -> BaseException | None:
        outcome = self._outcome
        if outcome is None:
            return super().exception(timeout)
        return outcome.error if isinstance(outcome, Failed) else None
