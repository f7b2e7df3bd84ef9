"""The engine's promises, tested through the embedded scheduler as a user would use it."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from scheduler import Task, TaskState
from scheduler.actors.partition_executor import PartitionExecutor
from scheduler.codec import Command, Op
from scheduler.engine.messages import ScheduledTask
from scheduler.engine.settings import EngineSettings, RetryPolicy
from scheduler.partitioning import partition_for
from scheduler.testing import TEST_SETTINGS, embedded_engine
from tests.engine.flaky import flaky_wrapper
from tests.engine.helpers import Recorder, soon, stepped_engine


def enqueue_all(engine, tasks):
    for future in [engine.client.schedule_task(task) for task in tasks]:
        future.result(timeout=10)


def status_of(engine, key):
    partition = partition_for(key.ordering_id.encode(), 4)
    return engine.store.fetch_statuses(partition, [key]).get(key)


def executor_of(engine, ordering_id):
    """A proxy of the PartitionExecutor of `ordering_id`'s partition."""
    tree = engine.worker.topic.trees.get()[partition_for(ordering_id.encode(), 4)]
    refs = tree.refs
    return next(ref for ref in refs if ref.actor_class is PartitionExecutor).proxy()


def test_tasks_of_one_ordering_id_run_in_key_order(data_dir):
    recorder = Recorder()
    with stepped_engine(recorder, data_dir=data_dir) as engine:
        tasks = [Task("account-1", engine.at(5 * i), f"step-{i:03d}") for i in range(60)]
        enqueue_all(engine, tasks)
        engine.join()
    assert recorder.runs_of("account-1") == [task.key for task in tasks]


def test_tasks_due_at_the_same_millisecond_run_in_uniqueness_key_order(data_dir):
    recorder = Recorder()
    with stepped_engine(recorder, data_dir=data_dir) as engine:
        due = engine.at(1500)
        enqueue_all(engine, [Task("o", due, key) for key in ("c", "a", "b")])
        engine.join()
    assert [key.uniqueness_key for key in recorder.keys()] == ["a", "b", "c"]


def test_one_ordering_id_runs_one_task_at_a_time(data_dir):
    recorder = Recorder()
    recorder.block = lambda task: task.uniqueness_key == "first"
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        first = Task("o", soon(), "first")
        enqueue_all(engine, [first, Task("o", soon(1), "second")])
        assert recorder.started[first.key].wait(10)
        assert recorder.running == 1 and len(recorder.calls) == 1
        recorder.release.set()
        engine.join()
    assert [key.uniqueness_key for key in recorder.keys()] == ["first", "second"]


def test_a_stuck_ordering_id_does_not_delay_the_others(data_dir):
    recorder = Recorder()
    recorder.block = lambda task: task.ordering_id == "stuck"
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        stuck = Task("stuck", soon(), "forever")
        enqueue_all(engine, [stuck, Task("stuck", soon(1), "behind")])
        assert recorder.started[stuck.key].wait(10)
        others = [Task(f"free-{i}", soon(), "x") for i in range(20)]
        enqueue_all(engine, others)
        for task in others:
            assert recorder.started[task.key].wait(10)
        assert "behind" not in [key.uniqueness_key for key in recorder.keys()]
        recorder.release.set()
        engine.join()
    assert recorder.runs_of("stuck")[-1].uniqueness_key == "behind"


def test_a_task_never_starts_before_its_scheduled_time(data_dir):
    starts = {}

    def executor(task, context):
        starts[task.key] = engine.clock.now_ms()

    with stepped_engine(executor, data_dir=data_dir) as engine:
        tasks = [Task(f"o{i}", engine.at(200 + 100 * i), "k") for i in range(10)]
        enqueue_all(engine, tasks)
        engine.join()
    for task in tasks:
        assert starts[task.key] >= task.key.scheduled_ms


def test_enqueuing_a_pending_key_again_overwrites_its_data(data_dir):
    recorder = Recorder()
    with stepped_engine(recorder, data_dir=data_dir) as engine:
        due = engine.at(1500)
        enqueue_all(engine, [Task("o", due, "k", {"version": 1})])
        enqueue_all(engine, [Task("o", due, "k", {"version": 2})])
        engine.join()
    assert [data for _, _, data in recorder.calls] == [{"version": 2}]


def test_a_due_task_cancelled_later_in_its_own_batch_never_starts(data_dir):
    # A topic move re-produces a task and its cancel back to back: one batch, applied in order.
    # The cancel's status write is slow, as a store's can be: time enough for a task handed on
    # before it to start.
    recorder = Recorder()
    flaky, wrap = flaky_wrapper()

    def slow_status_write(method, partition):
        if method == "record_statuses":
            time.sleep(0.3)
        return False

    with stepped_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        flaky[0].should_fail = slow_status_write
        task = Task("o", engine.at(), "k")
        tree = engine.worker.topic.trees.get()[partition_for(b"o", 4)]
        batch = [Command(Op.SCHEDULE, task), Command(Op.CANCEL, Task.from_key(task.key, {}))]
        tree.persistence.persist(batch, 0).get(timeout=10)
        engine.join()
        assert status_of(engine, task.key).state is TaskState.CANCELLED
    assert recorder.keys() == []


def test_a_completed_key_never_runs_again(data_dir):
    recorder = Recorder()
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        task = Task("o", soon(), "once")
        enqueue_all(engine, [task])
        engine.join()
        enqueue_all(engine, [Task("o", task.scheduled_time, "once", {"again": True})])
        engine.join()
        assert status_of(engine, task.key).state is TaskState.SUCCEEDED
    assert recorder.keys() == [task.key]


def test_a_copy_whose_status_was_read_before_its_key_finished_does_not_run(data_dir):
    # The race the executor guards against: a rewrite of a key is pushed with a status read
    # (nothing final yet) and the key finishes before the copy reaches the executor.
    # "Read before" and "read after" are the partition's status versions, not times.
    recorder = Recorder()
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        statuses = engine.worker.topic.unflushed.get()[partition_for(b"o", 4)]
        read_before = statuses.version
        task = Task("o", soon(), "raced")
        enqueue_all(engine, [task])
        engine.join()
        executor = executor_of(engine, "o")
        executor.execute([ScheduledTask(task, checked=read_before)]).get()
        engine.join()
        assert recorder.keys() == [task.key]
        # Control: a copy read after the finish is not refused by that guard.
        executor.execute([ScheduledTask(task, checked=statuses.version)]).get()
        engine.join()
    assert recorder.keys() == [task.key, task.key]


def test_a_copy_read_before_its_key_finished_is_refused_however_late_it_arrives(data_dir):
    # No time window: an hour after the finish, the stale copy is still known for one.
    recorder = Recorder()
    with stepped_engine(recorder, data_dir=data_dir) as engine:
        statuses = engine.worker.topic.unflushed.get()[partition_for(b"o", 4)]
        read_before = statuses.version
        task = Task("o", engine.at(), "late")
        enqueue_all(engine, [task])
        engine.join()
        engine.clock.advance(3600)
        executor_of(engine, "o").execute([ScheduledTask(task, checked=read_before)]).get()
        engine.join()
        assert status_of(engine, task.key).state is TaskState.SUCCEEDED
    assert recorder.keys() == [task.key]


def test_failed_attempts_are_retried_with_backoff_then_marked_failed(data_dir):
    recorder = Recorder()
    recorder.fail = lambda task, ctx: task.uniqueness_key == "bad"
    with stepped_engine(recorder, data_dir=data_dir) as engine:
        bad, good = Task("o", engine.at(), "bad", {"x": 1}), Task("o", engine.at(1), "good")
        enqueue_all(engine, [bad, good])
        engine.join(raise_failures=False)
        status = status_of(engine, bad.key)
    attempts = [attempt for key, attempt, _ in recorder.calls if key == bad.key]
    assert attempts == [1, 2, 3]
    assert status.state is TaskState.FAILED and status.attempts == 3
    assert "failing bad on attempt 3" in status.last_error
    assert status.data == {"x": 1}  # kept, so that an operator can retry it
    assert recorder.keys()[-1] == good.key  # the queue moved on after the final failure


def test_a_task_that_fails_once_succeeds_on_retry(data_dir):
    recorder = Recorder()
    recorder.fail = lambda task, ctx: ctx.attempt == 1
    with stepped_engine(recorder, data_dir=data_dir) as engine:
        task = Task("o", engine.at(), "flaky")
        enqueue_all(engine, [task])
        engine.join(raise_failures=False)
        assert status_of(engine, task.key).state is TaskState.SUCCEEDED
    assert [attempt for _, attempt, _ in recorder.calls] == [1, 2]


def test_join_reraises_the_first_executor_failure_in_the_test_thread(data_dir):
    def executor(task, context):
        raise ValueError("the executor's own error")

    with (
        embedded_engine(executor, data_dir=data_dir) as engine,
        pytest.raises(ValueError, match="the executor's own error"),
    ):
        enqueue_all(engine, [Task("o", soon(), "k")])
        engine.join()


def test_retry_policy_delays_grow_exponentially_within_the_jitter():
    policy = RetryPolicy(base_delay_s=1, max_delay_s=10, jitter=0.5)
    assert policy.delay_s(1, 0.5) == 1
    assert policy.delay_s(3, 0.5) == 4
    assert policy.delay_s(10, 0.5) == 10
    assert policy.delay_s(2, 0.0) == 1 and policy.delay_s(2, 0.999) == pytest.approx(3, 0.01)


def test_an_attempt_past_its_timeout_is_cancelled_and_retried(data_dir):
    cancelled = threading.Event()

    def executor(task, context):
        if context.attempt == 1:
            context.on_cancel(cancelled.set)
            context.cancelled.wait(10)
            context.raise_if_cancelled()

    settings = EngineSettings(
        task_timeout_s=0.2, retry=RetryPolicy(max_attempts=2, base_delay_s=0.01, jitter=0)
    )
    with embedded_engine(executor, data_dir=data_dir, settings=settings) as engine:
        task = Task("o", soon(), "slow")
        enqueue_all(engine, [task])
        engine.join(raise_failures=False)
        status = status_of(engine, task.key)
    assert cancelled.is_set()
    assert status.state is TaskState.SUCCEEDED and status.attempts == 2


def test_the_pool_never_runs_more_attempts_than_its_size(data_dir):
    recorder = Recorder()
    settings = EngineSettings(pool_size=3, retry=TEST_SETTINGS.retry)
    with embedded_engine(recorder, data_dir=data_dir, settings=settings) as engine:
        enqueue_all(engine, [Task(f"o{i}", soon(), "k") for i in range(200)])
        engine.join()
        assert engine.worker.executor_service.peak_running <= 3
    assert recorder.peak <= 3 and len(recorder.calls) == 200


def test_a_task_naming_an_unknown_job_fails_at_once_without_retries(data_dir):
    from scheduler.errors import UnknownExecutorError

    calls = []

    def executor(task, context):
        calls.append(context.attempt)
        raise UnknownExecutorError("unknown Spark job 'nope:nothing'")

    with embedded_engine(executor, data_dir=data_dir) as engine:
        task = Task("o", soon(), "k")
        enqueue_all(engine, [task])
        engine.join(raise_failures=False)
        status = status_of(engine, task.key)
    assert calls == [1]
    assert status.state is TaskState.FAILED and "unknown Spark job" in status.last_error


def test_a_rewrite_pushed_while_the_finish_waits_to_be_flushed_does_not_run_again(data_dir):
    # A finish is visible to TaskPersistence before its status row is written. Here status rows
    # are flushed only every 15 s, so the key's finish still waits in the buffer when a rewrite
    # of the key (a replayed log record, say) is pushed, and the rewrite must see the finish.
    recorder = Recorder()
    slow_flush = dataclasses.replace(TEST_SETTINGS, status_flush_ms=15_000)
    with embedded_engine(recorder, data_dir=data_dir, settings=slow_flush) as engine:
        executor = executor_of(engine, "o")
        raced = Task("o", soon(), "raced")
        enqueue_all(engine, [raced])
        assert recorder.started[raced.key].wait(10)
        deadline = time.monotonic() + 10
        while executor.counts().get() != (0, 0) and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.01)  # so that the rewrite's status is read in a later millisecond
        enqueue_all(engine, [Task("o", raced.scheduled_time, "raced", {"again": True})])
        time.sleep(0.3)  # time for the rewrite to be pushed and, if let through, to run
        # The rewrite's persist wrote the waiting finish with its row (one round trip), before
        # its push read the key's status: the finish is in the store, not only in the buffer.
        assert status_of(engine, raced.key).state is TaskState.SUCCEEDED
        engine.join()
        assert status_of(engine, raced.key).state is TaskState.SUCCEEDED
    assert recorder.keys() == [raced.key]
