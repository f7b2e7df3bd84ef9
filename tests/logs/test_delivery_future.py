"""DeliveryFuture keeps `concurrent.futures.Future`'s behaviour while building its lock lazily."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, InvalidStateError, as_completed, wait

import pytest

from scheduler.logs._delivery import DeliveryFuture
from scheduler.logs.abc import BatchFuture

# Both ways a future is resolved: `set_result` (Future's own, under a lock) and `_resolve`, the
# lock-free path the Kafka producer's delivery reports take.
RESOLVERS = {
    "set_result": DeliveryFuture.set_result,
    "_resolve": DeliveryFuture._resolve,
}
resolvers = pytest.mark.parametrize("resolve", RESOLVERS.values(), ids=list(RESOLVERS))


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


@resolvers
def test_a_waiting_thread_wakes_when_another_thread_resolves_it(resolve) -> None:
    future = DeliveryFuture()
    results: list[int] = []
    waiter = threading.Thread(target=lambda: results.append(future.result(10)))
    waiter.start()
    while future._cond is None:  # the waiter has asked for the condition
        threading.Event().wait(0.001)
    resolve(future, 7)
    waiter.join(10)
    assert results == [7]


def test_a_pending_future_times_out_and_cannot_be_cancelled() -> None:
    future = DeliveryFuture()
    with pytest.raises(TimeoutError):
        future.result(0.01)
    assert not future.cancel()  # a record handed to the log cannot be taken back
    assert future.running()


@resolvers
def test_callbacks_registered_before_resolution_run_once_on_resolution(resolve) -> None:
    future = DeliveryFuture()
    seen: list[int] = []
    future.add_done_callback(lambda done: seen.append(done.result()))
    assert seen == []
    resolve(future, 1)
    assert seen == [1]


@resolvers
def test_on_success_runs_before_waiters_wake_and_not_on_failure(resolve) -> None:
    counted: list[str] = []
    ok = DeliveryFuture(on_success=lambda: counted.append("ok"))
    resolve(ok, 0)
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


@resolvers
def test_wait_and_as_completed_see_every_future(resolve) -> None:
    futures = [DeliveryFuture() for _ in range(4)]
    resolve(futures[0], 0)
    done, pending = wait(futures, timeout=0, return_when=FIRST_COMPLETED)
    assert done == {futures[0]} and len(pending) == 3
    resolver = threading.Timer(0.05, lambda: [resolve(f, n) for n, f in enumerate(futures[1:])])
    resolver.start()
    assert sorted(f.result() for f in as_completed(futures, timeout=10)) == [0, 0, 1, 2]
    resolver.join()


@resolvers
def test_racing_waiters_and_resolvers_never_lose_a_wake_up(resolve) -> None:
    futures = [DeliveryFuture() for _ in range(2000)]
    results: list[int] = []
    called_back: list[int] = []

    def resolve_all() -> None:
        for n, future in enumerate(futures):
            resolve(future, n)

    def consume() -> None:
        for n, future in enumerate(futures):
            if n % 3 == 0:  # some register a callback instead of blocking
                future.add_done_callback(lambda done: called_back.append(done.result()))
            results.append(future.result(10))

    threads = [threading.Thread(target=resolve_all), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == list(range(2000))
    assert sorted(called_back) == list(range(0, 2000, 3))


def test_a_bulk_future_resolves_to_the_count_once_every_record_is_delivered() -> None:
    batch = BatchFuture(3)
    batch.delivered()
    batch.delivered()
    assert not batch.future.done()
    batch.delivered()
    assert batch.future.result(0) == 3


def test_a_bulk_future_fails_with_the_first_error_even_if_the_rest_succeed() -> None:
    batch = BatchFuture(3)
    batch.delivered(RuntimeError("first"))
    batch.delivered()
    batch.delivered(RuntimeError("second"))
    batch.delivered()
    with pytest.raises(RuntimeError, match="first"):
        batch.future.result(0)


def test_a_bulk_future_counts_deliveries_from_racing_threads() -> None:
    batch = BatchFuture(40_000)
    threads = [
        threading.Thread(target=lambda: [batch.delivered() for _ in range(10_000)])
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert batch.future.result(0) == 40_000
