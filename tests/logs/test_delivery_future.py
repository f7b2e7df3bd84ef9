"""DeliveryFuture keeps `concurrent.futures.Future`'s behaviour while building its lock lazily."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, InvalidStateError, as_completed, wait

import pytest

from scheduler.logs._delivery import DeliveryFuture


def test_a_future_resolved_before_anyone_looked_answers_at_once() -> None:
    future = DeliveryFuture()
    future.set_result(3)
    assert future.done() and future.result(0) == 3 and future.exception(0) is None
    seen: list[int] = []
    future.add_done_callback(lambda done: seen.append(done.result()))
    assert seen == [3]


def test_a_failed_future_raises_its_error() -> None:
    future = DeliveryFuture()
    future.set_exception(RuntimeError("broker gone"))
    with pytest.raises(RuntimeError, match="broker gone"):
        future.result()
    assert isinstance(future.exception(), RuntimeError)


def test_a_waiting_thread_wakes_when_another_thread_resolves_it() -> None:
    future = DeliveryFuture()
    results: list[int] = []
    waiter = threading.Thread(target=lambda: results.append(future.result(10)))
    waiter.start()
    while future._cond is None:  # the waiter has asked for the condition
        threading.Event().wait(0.001)
    future.set_result(7)
    waiter.join(10)
    assert results == [7]


def test_a_pending_future_times_out_and_cannot_be_cancelled() -> None:
    future = DeliveryFuture()
    with pytest.raises(TimeoutError):
        future.result(0.01)
    assert not future.cancel()  # a record handed to the log cannot be taken back
    assert future.running()


def test_callbacks_registered_before_resolution_run_once_on_resolution() -> None:
    future = DeliveryFuture()
    seen: list[int] = []
    future.add_done_callback(lambda done: seen.append(done.result()))
    assert seen == []
    future.set_result(1)
    assert seen == [1]


def test_on_success_runs_before_waiters_wake_and_not_on_failure() -> None:
    counted: list[str] = []
    ok = DeliveryFuture(on_success=lambda: counted.append("ok"))
    ok.set_result(0)
    failed = DeliveryFuture(on_success=lambda: counted.append("failed"))
    failed.set_exception(RuntimeError("x"))
    assert counted == ["ok"]


def test_resolving_twice_is_an_error() -> None:
    observed, unobserved = DeliveryFuture(), DeliveryFuture()
    observed.add_done_callback(lambda _: None)
    for future in (observed, unobserved):
        future.set_result(1)
        with pytest.raises(InvalidStateError):
            future.set_result(2)


def test_wait_and_as_completed_see_every_future() -> None:
    futures = [DeliveryFuture() for _ in range(4)]
    futures[0].set_result(0)
    done, pending = wait(futures, timeout=0, return_when=FIRST_COMPLETED)
    assert done == {futures[0]} and len(pending) == 3
    resolver = threading.Timer(0.05, lambda: [f.set_result(n) for n, f in enumerate(futures[1:])])
    resolver.start()
    assert sorted(f.result() for f in as_completed(futures, timeout=10)) == [0, 0, 1, 2]
    resolver.join()


def test_racing_waiters_and_resolvers_never_lose_a_wake_up() -> None:
    futures = [DeliveryFuture() for _ in range(2000)]
    results: list[int] = []

    def resolve() -> None:
        for n, future in enumerate(futures):
            future.set_result(n)

    def consume() -> None:
        results.extend(future.result(10) for future in futures)

    threads = [threading.Thread(target=resolve), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == list(range(2000))
