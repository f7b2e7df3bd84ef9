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


def test_a_succeeded_task_runs_again_on_request_before_the_later_keys_of_its_ordering_id(
    data_dir,
):
    recorder = Recorder()
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        done = Task("o", soon(), "done", {"run": 1})
        engine.client.schedule_task(done).result(timeout=10)
        engine.join()
        later = Task("o", soon(1_000), "later")
        engine.client.schedule_task(later).result(timeout=10)
        engine.client.rerun_task(done.key, {"run": 2}).result(timeout=10)
        engine.join()
        status = engine.store.fetch_statuses(partition_of(done), [done.key])[done.key]
    assert [(key.uniqueness_key, data) for key, _, data in recorder.calls] == [
        ("done", {"run": 1}),
        ("done", {"run": 2}),  # its key comes first: it runs before the later task
        ("later", {}),
    ]
    assert status.state is TaskState.SUCCEEDED and status.attempts == 1


def test_a_rerun_without_data_takes_the_data_the_status_kept_and_leaves_a_pending_key_alone(
    data_dir,
):
    recorder = Recorder()
    recorder.fail = lambda task, ctx: task.uniqueness_key == "failed" and ctx.attempt < 9
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        failed = Task("o", soon(), "failed", {"payload": 7})
        engine.client.schedule_task(failed).result(timeout=10)
        engine.join(raise_failures=False)
        pending = Task("p", soon(2_000), "pending")
        engine.client.schedule_task(pending).result(timeout=10)
        calls = len(recorder.calls)
        engine.client.rerun_task(failed.key).result(timeout=10)
        engine.client.rerun_task(pending.key).result(timeout=10)  # not finished: ignored
        engine.join(raise_failures=False)
        reruns = recorder.calls[calls:]
    assert [key for key, _, _ in reruns if key == pending.key] == [pending.key]  # once, on time
    assert reruns[0] == (failed.key, 1, {"payload": 7})  # from its first attempt
