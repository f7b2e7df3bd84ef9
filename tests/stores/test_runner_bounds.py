"""Runner.many without a server: ordered rows, at most `concurrency` requests in flight, retries of
only what failed transiently, and a bounded wait for a request that never answers.

A fake session stands in for the driver. A thread of its own answers the requests, newest first
(so answers arrive out of order), as each test's `reply` says.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cassandra import InvalidRequest, OperationTimedOut

from scheduler.errors import BackendUnavailableError
from scheduler.stores import _cassandra_session
from scheduler.stores._cassandra_session import Item, Runner
from scheduler.stores._retry import RetryPolicy

FAST = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02)
CONCURRENCY = 4

Rows = list[tuple[Any, ...]]
Reply = Callable[[str, int], Rows | BaseException | None]
"""The answer to the n-th send (from 1) of a statement: rows, an error, or None for none ever."""


class FakeFuture:
    """What the runner uses of the driver's ResponseFuture (and what `execute_concurrent` uses,
    so that these tests also run against the implementation that used it)."""

    has_more_pages = False
    _col_names = None
    _col_types = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: list[
            tuple[Callable[..., Any], tuple[Any, ...], Callable[..., Any], tuple[Any, ...]]
        ] = []
        self._done = False
        self._outcome: Any = None

    def add_callbacks(
        self,
        callback: Callable[..., Any],
        errback: Callable[..., Any],
        callback_args: tuple[Any, ...] = (),
        errback_args: tuple[Any, ...] = (),
    ) -> None:
        with self._lock:
            if not self._done:
                self._callbacks.append((callback, callback_args, errback, errback_args))
                return
        self._fire(callback, callback_args, errback, errback_args)

    def clear_callbacks(self) -> None:
        with self._lock:
            self._callbacks = []

    def resolve(self, outcome: Rows | BaseException) -> None:
        with self._lock:
            self._done, self._outcome = True, outcome
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._fire(*callback)

    def result(self) -> Rows:
        assert self._done, "the result was read before the request answered"
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return list(self._outcome)

    def _fire(
        self,
        callback: Callable[..., Any],
        callback_args: tuple[Any, ...],
        errback: Callable[..., Any],
        errback_args: tuple[Any, ...],
    ) -> None:
        if isinstance(self._outcome, BaseException):
            errback(self._outcome, *errback_args)
        else:
            callback(self._outcome, *callback_args)


class FakeSession:
    """Answers requests from its own thread, newest first, once `gate` are waiting or all of
    `total` sends have been made; counts the requests in flight."""

    default_timeout = 0.0  # the driver's request timeout; the tests patch the hang limit instead

    def __init__(self, reply: Reply, *, gate: int = 1, total: int = 0) -> None:
        self._reply = reply
        self._gate = gate
        self._total = total
        self._changed = threading.Condition()
        self._waiting: list[tuple[str, int, FakeFuture]] = []
        self._closed = False
        self.sent: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._thread = threading.Thread(target=self._answer, daemon=True)
        self._thread.start()

    def execute_async(self, statement: str, params: Any, **_: Any) -> FakeFuture:
        future = FakeFuture()
        with self._changed:
            self.sent.append(statement)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self._waiting.append((statement, self.sent.count(statement), future))
            self._changed.notify()
        return future

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join(timeout=5)

    def _may_answer(self) -> bool:
        gate = self._gate if len(self.sent) < self._total else 1
        return self._closed or (bool(self._waiting) and len(self._waiting) >= gate)

    def _answer(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(self._may_answer)
                if self._closed:
                    return
                statement, nth, future = self._waiting.pop()
                outcome = self._reply(statement, nth)
                if outcome is None:  # never answered: it stays in flight
                    continue
                self.in_flight -= 1  # before the callback, which lets the runner send again
            future.resolve(outcome)


@pytest.fixture
def sessions() -> Iterator[Callable[..., FakeSession]]:
    made: list[FakeSession] = []

    def make(reply: Reply, **options: Any) -> FakeSession:
        made.append(FakeSession(reply, **options))
        return made[-1]

    yield make
    for session in made:
        session.close()


def items(count: int) -> list[Item]:
    return [(f"s{i}", (i,)) for i in range(count)]


def rows_of(statement: str) -> Rows:
    return [(statement, 0), (statement, 1)]


def runner(session: FakeSession) -> Runner:
    return Runner(session, target="fake:9042", concurrency=CONCURRENCY, policy=FAST)  # type: ignore[arg-type]


def test_every_item_answers_with_its_rows_in_order_within_the_concurrency_limit(
    sessions: Callable[..., FakeSession],
) -> None:
    session = sessions(lambda statement, nth: rows_of(statement), gate=CONCURRENCY, total=10)

    results = runner(session).many(items(10), "read")

    assert results == [rows_of(f"s{i}") for i in range(10)]
    assert session.most_in_flight == CONCURRENCY
    assert Counter(session.sent) == {f"s{i}": 1 for i in range(10)}


def test_only_the_item_that_failed_transiently_is_sent_again(
    sessions: Callable[..., FakeSession],
) -> None:
    def reply(statement: str, nth: int) -> Rows | BaseException:
        return OperationTimedOut("blink") if (statement, nth) == ("s3", 1) else rows_of(statement)

    session = sessions(reply)

    results = runner(session).many(items(8), "write")

    assert results == [rows_of(f"s{i}") for i in range(8)]
    assert Counter(session.sent) == {f"s{i}": 2 if i == 3 else 1 for i in range(8)}


@pytest.mark.timeout(10)  # the runner before the hang limit waited here for ever
def test_an_item_that_never_answers_ends_in_backend_unavailable_within_the_hang_limit(
    sessions: Callable[..., FakeSession], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cassandra_session, "_HANG_LIMIT_S", 0.2)
    session = sessions(lambda statement, nth: None if statement == "s2" else rows_of(statement))
    started = time.monotonic()

    with pytest.raises(BackendUnavailableError) as raised:
        runner(session).many(items(6), "write")

    assert time.monotonic() - started < 5
    assert isinstance(raised.value.__cause__, OperationTimedOut)
    assert Counter(session.sent) == {f"s{i}": FAST.attempts if i == 2 else 1 for i in range(6)}


def test_a_non_transient_error_is_raised_without_a_retry(
    sessions: Callable[..., FakeSession],
) -> None:
    def reply(statement: str, nth: int) -> Rows | BaseException:
        if statement == "s2":
            return InvalidRequest('Invalid STRING constant (x) for "k" of type int')
        return rows_of(statement)

    session = sessions(reply)

    with pytest.raises(InvalidRequest):
        runner(session).many(items(8), "read")

    assert max(Counter(session.sent).values()) == 1
