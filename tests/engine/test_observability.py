"""Metrics count what the engine does, and its clients' log lines come out as they happen."""

from __future__ import annotations

import time

import pytest
from prometheus_client import REGISTRY

from scheduler import Task, worker
from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.testing import embedded_engine
from tests.engine.helpers import Recorder, soon

COUNTERS = ("enqueued", "persisted", "executed", "retried", "failed")


def sample(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    return value or 0.0


def snapshot() -> dict[str, float]:
    values = {name: sample(f"scheduler_tasks_{name}_total") for name in COUNTERS}
    values["lag_count"] = sample("scheduler_firing_lag_seconds_count")
    return values


def test_metrics_count_enqueued_persisted_executed_retried_and_failed_tasks(data_dir):
    recorder = Recorder()
    recorder.fail = lambda task, ctx: task.uniqueness_key == "bad"
    before = snapshot()
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        tasks = [Task(f"o{i}", soon(), "good") for i in range(10)] + [Task("x", soon(), "bad")]
        for task in tasks:
            engine.client.schedule_task(task).result(timeout=10)
        engine.join(raise_failures=False)
        assert sample("scheduler_partitions_owned") == 4
    after = snapshot()
    delta = {name: after[name] - before[name] for name in after}
    assert delta["enqueued"] == 11
    assert delta["persisted"] == 11
    assert delta["executed"] == 10
    assert delta["retried"] == 2 and delta["failed"] == 1  # 3 attempts in TEST_SETTINGS
    assert delta["lag_count"] == 11  # first attempts only


def test_a_running_worker_serves_its_logs_shared_clients_every_few_seconds(
    data_dir, monkeypatch: pytest.MonkeyPatch
):
    """Kafka's admin client holds its log lines until it is polled, and only `serve` polls it."""
    monkeypatch.setattr(worker, "MARK_COMMIT_INTERVAL_S", 0.05)
    served: list[float] = []
    monkeypatch.setattr(EmbeddedTaskLog, "serve", lambda log: served.append(time.monotonic()))
    with embedded_engine(Recorder(), data_dir=data_dir):
        deadline = time.monotonic() + 10
        while len(served) < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(served) >= 10, f"served {len(served)} times in 10 s"
