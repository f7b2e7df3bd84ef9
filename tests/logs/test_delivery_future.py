"""DeliveryFuture keeps `concurrent.futures.Future`'s behaviour while making its `Future` part
only when something needs it (and then through Future's public methods alone)."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, InvalidStateError, as_completed, wait

import pytest

from scheduler.logs._delivery import DeliveryFuture
from scheduler.logs.abc import BatchFuture

# Both states a future can be resolved in: before anything made its `Future` part (the outcome
# goes to its own fields) and after (Future's own `set_result`).
RESOLVERS = {
    "set_result": DeliveryFuture.set_result,
    "set_result on a made future": lambda future, value: (
        future.running(),
        future.set_result(value),
    ),
}
resolvers = pytest.mark.parametrize("resolve", RESOLVERS.values(), ids=list(RESOLVERS))


def test_a_future_resolved_before_anyone_looked_answers_at_once() -> None:
    future = DeliveryFuture()
    future.set_result(3)
    assert future.done() and future.result(0) == 3 and future.exception(0) is None
    seen: list[int] = []
    future.add_done_callback(lambda done: seen.append(done.result()))
    assert seen == [3]


def test_a_future_read_after_its_outcome_never_makes_its_future_part() -> None:
    futures = [DeliveryFuture() for _ in range(3)]
    futures[0].set_result(1)
    futures[1].set_exception(RuntimeError("x"))
    assert futures[0].result() == 1 and futures[0].done() and futures[0].exception() is None
    assert isinstance(futures[1].exception(), RuntimeError) and futures[1].done()
    assert not futures[2].done()
    assert not any(future._made for future in futures)
    assert "finished" in repr(futures[0]) and futures[0]._made  # anything else makes it


def test_a_made_future_replays_the_outcome_it_held() -> None:
    ok, failed = DeliveryFuture(), DeliveryFuture()
    ok.set_result(4)
    failed.set_exception(RuntimeError("gone"))
    assert wait([ok, failed], timeout=0).not_done == set()
    assert ok._made and failed._made
    assert ok.result() == 4 and not ok.running() and not ok.cancel()
    with pytest.raises(RuntimeError, match="gone"):
        failed.result()


def test_an_attribute_no_future_has_is_still_missing() -> None:
    future = DeliveryFuture()
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = future.no_such_thing  # type: ignore[attr-defined]
    assert not future.done()


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
    while not future._made:  # the waiter has asked for the `Future` part
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


def test_the_future_part_publishes_its_condition_after_every_other_field() -> None:
    """A thread that finds the condition (every `Future` method takes it first) must find the
    rest: with the condition set first, a CI run deadlocked (test below). A reader that took the
    condition missed `_state`, and waited in `__getattr__` for the lock the maker held while it
    waited for that condition. The instance's dict keeps the order the fields were set in."""
    for made_by in (lambda f: f.running(), lambda f: (f.set_result(1), repr(f))):
        future = DeliveryFuture()
        made_by(future)
        fields = list(vars(future))
        assert fields[-1] == "_condition" and {"_state", "_waiters"} <= set(fields), fields


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
