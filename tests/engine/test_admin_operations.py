"""Operators cancel pending tasks and retry or drop failed ones; the log carries the request."""

from __future__ import annotations

from scheduler import Task, TaskState
from scheduler.partitioning import partition_for
from scheduler.testing import embedded_engine
from tests.engine.helpers import Recorder, soon


def partition_of(task: Task) -> int:
    return partition_for(task.ordering_id.encode(), 4)


def test_cancelling_a_pending_task_means_it_never_runs(data_dir):
    recorder = Recorder()
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        doomed, kept = Task("o", soon(1_500), "doomed"), Task("o", soon(1_600), "kept")
        for task in (doomed, kept):
            engine.client.schedule_task(task).result(timeout=10)
        engine.client.cancel_task(doomed.key).result(timeout=10)
        engine.join()
        status = engine.store.fetch_statuses(partition_of(doomed), [doomed.key])[doomed.key]
    assert recorder.keys() == [kept.key]
    assert status.state is TaskState.CANCELLED


def test_a_failed_task_can_be_retried_with_its_original_data(data_dir):
    recorder = Recorder()
    broken = {"yes": True}
    recorder.fail = lambda task, ctx: broken["yes"]
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        task = Task("o", soon(), "k", {"payload": 7})
        engine.client.schedule_task(task).result(timeout=10)
        engine.join(raise_failures=False)
        partition = partition_of(task)
        assert (
            engine.store.fetch_statuses(partition, [task.key])[task.key].state is TaskState.FAILED
        )
        broken["yes"] = False
        engine.client.retry_task(task.key).result(timeout=10)
        engine.join(raise_failures=False)
        status = engine.store.fetch_statuses(partition, [task.key])[task.key]
    assert status.state is TaskState.SUCCEEDED and status.attempts == 1
    assert recorder.calls[-1][2] == {"payload": 7}


def test_dropping_a_failed_task_forgets_it(data_dir):
    recorder = Recorder()
    recorder.fail = lambda task, ctx: True
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        task = Task("o", soon(), "k")
        engine.client.schedule_task(task).result(timeout=10)
        engine.join(raise_failures=False)
        engine.client.drop_task(task.key).result(timeout=10)
        engine.join(raise_failures=False)
        assert engine.store.fetch_statuses(partition_of(task), [task.key]) == {}
        assert engine.store.list_tasks(partition_of(task), ordering_id="o") == []
