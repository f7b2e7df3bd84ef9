"""`scheduler_consumer_lag_records`: records past the group's commit, for the owned partitions."""

from __future__ import annotations

import threading
import time

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from scheduler import Task
from scheduler.metrics import LagCollector
from scheduler.testing import embedded_engine
from tests.engine.flaky import FlakyStore
from tests.engine.helpers import Recorder, soon
from tests.engine.test_failures_and_restarts import enqueue_all, ids_on_partition


def lag_of(partition: int) -> float | None:
    return REGISTRY.get_sample_value(
        "scheduler_consumer_lag_records", {"partition": str(partition)}
    )


def test_lag_counts_what_the_store_has_not_taken_and_drops_to_zero_once_it_has(data_dir):
    recorder = Recorder()
    refusing = threading.Event()
    refusing.set()

    def wrap(store):
        flaky = FlakyStore(store)
        flaky.unavailable = True  # refused, not a bug: the partition waits in OUTAGE
        flaky.should_fail = lambda method, p: (
            method == "write_tasks" and p == 1 and refusing.is_set()
        )
        return flaky

    with embedded_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        enqueue_all(engine, [Task(oid, soon(), "k") for oid in ids_on_partition(1, 7)])
        enqueue_all(engine, [Task(oid, soon(), "k") for oid in ids_on_partition(2, 3)])
        deadline = time.monotonic() + 10
        while lag_of(2) != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lag_of(2) == 0  # stored and committed
        assert lag_of(1) == 7  # the store refuses them: not committed
        assert {lag_of(p) for p in (0, 3)} == {0}  # owned, nothing enqueued
        refusing.clear()
        engine.join()
        assert lag_of(1) == 0
    assert lag_of(1) is None  # a stopped worker reports nothing


def test_a_source_that_cannot_answer_is_left_out_of_the_scrape() -> None:
    registry = CollectorRegistry()
    collector = LagCollector(registry=registry)

    def unreachable() -> dict[int, int]:
        raise ConnectionError("broker down")

    collector.watch(unreachable)
    collector.watch(lambda: {3: 12, 1: 0})
    text = generate_latest(registry).decode()
    assert 'scheduler_consumer_lag_records{partition="3"} 12.0' in text
    assert 'scheduler_consumer_lag_records{partition="1"} 0.0' in text
    collector.unwatch(unreachable)
    assert "partition" in generate_latest(registry).decode()


def test_a_source_slower_than_the_budget_is_left_out_and_asked_once_at_a_time(caplog) -> None:
    registry = CollectorRegistry()
    collector = LagCollector(registry=registry, budget_s=0.2)
    answer = threading.Event()
    calls = []

    def restarting_broker() -> dict[int, int]:
        calls.append(time.monotonic())
        answer.wait(30)
        return {5: 40}

    collector.watch(restarting_broker)
    collector.watch(lambda: {3: 12})
    started = time.monotonic()
    text = generate_latest(registry).decode()
    assert time.monotonic() - started < 5  # the budget, not the slow source, set the pace
    assert 'scheduler_consumer_lag_records{partition="3"} 12.0' in text
    assert 'partition="5"' not in text
    assert "has not answered within 0.2 s" in caplog.text
    generate_latest(registry)  # while the first request is still under way
    assert len(calls) == 1  # no second request piled onto a slow log
    answer.set()
    text = generate_latest(registry).decode()
    assert 'scheduler_consumer_lag_records{partition="5"} 40.0' in text
