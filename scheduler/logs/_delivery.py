"""DeliveryFuture: the future `schedule_task` returns, cheap enough for one per record.

A `concurrent.futures.Future` builds a `threading.Condition` (a lock, a deque of waiters and
a handful of bound methods) when it is created, and takes it on every state change. Measured,
making and resolving one costs ten times what producing its record to Kafka costs, and
`schedule_task` makes one per task at hundreds of thousands of tasks a second, most of them
resolved before anyone looks at them.

So a DeliveryFuture is a `Future` whose base part is made only when something needs it. Until
then it holds its outcome in one field of its own, `_outcome`: None while pending, then the
result (an int: the record's partition) or a `Failed` holding the exception, set once and never
changed, by one store made under a module-wide lock. A future resolved before anyone waits
answers `done`, `result` and `exception` from that field without the lock: a reader sees None or
the outcome (one reference, written once; no second field has to agree with it). A partition is
a small int, which Python keeps made: resolving a future allocates nothing.
The first use of anything else of `Future` (a thread waiting on a pending future,
`add_done_callback`, `concurrent.futures.wait`, `as_completed`, `repr`) runs the public
constructor `Future.__init__` on it and replays the outcome through the public
`set_running_or_notify_cancel`/`set_result`/`set_exception`, under the same lock, so that the
replay and a delivery cannot interleave; from then on it is a plain `Future`. Nothing here reads
or writes a field of `concurrent.futures`, and nothing relies on the GIL making a step atomic:
it works the same on a free-threaded Python. A record handed to the log cannot be cancelled: the
future is running from the start.
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

    # Slots: the fields a future nobody waits on needs, without building Future's instance
    # dict (the base part, once made, lives there).
    __slots__ = ("_made", "_on_success", "_outcome")

    def __init__(self, on_success: Callable[[], object] | None = None) -> None:
        # Future.__init__ is deferred on purpose (`_make`): it builds the condition this class
        # spares a future nobody waits on.
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

    def _make(self) -> bool:
        """Make the `Future` part and replay the outcome into it; False if it was made already."""
        with _LOCK:
            if self._made:
                return False
            Future.__init__(self)
            self.set_running_or_notify_cancel()
            outcome = self._outcome
            # Nothing waits on a part made just now: no callback runs here.
            if isinstance(outcome, Failed):
                Future.set_exception(self, outcome.error)
            elif outcome is not None:
                Future.set_result(self, outcome)
            self._made = True
            return True

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
        # Never cancelled, so done is settled. A thread that serves delivery reports until a
        # future is done asks this in a loop, and must not make the part of every future.
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
