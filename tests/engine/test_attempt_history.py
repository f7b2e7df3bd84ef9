"""Every attempt of a task is recorded with the task's status: start, end, outcome, exit code or
error, worker and log path; a task left running by a dead or stopped worker is closed as
interrupted by the next owner and run again."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from scheduler import Task
from scheduler.engine.settings import EngineSettings, RetryPolicy
from scheduler.executors.command import CommandExecutor
from scheduler.model import Attempt, AttemptOutcome, TaskKey, TaskState, TaskStatus
from scheduler.partitioning import partition_for
from scheduler.stores.sqlite import SqliteTaskStore
from scheduler.testing import TEST_SETTINGS, embedded_engine
from tests.engine.helpers import Recorder, soon

PARTITIONS = 4


def partition(key: TaskKey) -> int:
    return partition_for(key.ordering_id.encode(), PARTITIONS)


def durations(outcome: str) -> float:
    name = "scheduler_task_duration_seconds_count"
    return REGISTRY.get_sample_value(name, {"outcome": outcome}) or 0.0


def test_a_task_that_fails_then_succeeds_keeps_both_attempts_and_its_data(
    data_dir, caplog: pytest.LogCaptureFixture
):
    recorder = Recorder()
    recorder.fail = lambda task, ctx: ctx.attempt == 1
    failed_before, succeeded_before = durations("failed"), durations("succeeded")
    caplog.set_level(logging.INFO, logger="scheduler.tasks")
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        task = Task("flaky", soon(), "once", {"n": 7})
        engine.client.schedule_task(task).result(timeout=10)
        engine.join(raise_failures=False)
        worker = engine.worker.client_id
        store = engine.store
        status = store.fetch_statuses(partition(task.key), [task.key])[task.key]
        attempts = store.attempts(partition(task.key), task.key)

    assert (status.state, status.attempts, status.data) == (TaskState.SUCCEEDED, 2, {"n": 7})
    first, second = attempts
    assert (first.number, first.outcome, first.worker) == (1, AttemptOutcome.FAILED, worker)
    assert "RuntimeError: failing once on attempt 1" in (first.error or "")
    assert (second.number, second.outcome, second.error) == (2, AttemptOutcome.SUCCEEDED, None)
    for attempt in attempts:
        assert attempt.started_ms is not None and attempt.ended_ms is not None
        assert attempt.duration_ms is not None and attempt.duration_ms >= 0
        assert attempt.worker == worker
    assert first.ended_ms <= second.started_ms  # type: ignore[operator]
    assert durations("failed") - failed_before == 1
    assert durations("succeeded") - succeeded_before == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "scheduler.tasks"]
    assert any(
        line.startswith(f"task {task.key} failed in ") and "(attempt 1 of 3)" in line
        for line in lines
    ), lines
    (done,) = [line for line in lines if "succeeded" in line]
    assert done.startswith(f"task {task.key} succeeded in ") and done.endswith("s (attempt 2)")
    assert any(r.levelno == logging.INFO and "succeeded" in r.getMessage() for r in caplog.records)


def test_a_command_attempt_keeps_its_exit_code_and_log_path(data_dir, tmp_path: Path):
    executor = CommandExecutor(log_dir=str(tmp_path / "logs"))
    argv = [
        "/bin/sh",
        "-c",
        'echo "try $SCHEDULER_ATTEMPT"; test "$SCHEDULER_ATTEMPT" -ge 2 || exit 3',
    ]
    with embedded_engine(executor, data_dir=data_dir) as engine:
        task = Task("cmd", soon(), "exit-3-then-0", {"argv": argv})
        engine.client.schedule_task(task).result(timeout=10)
        engine.join(raise_failures=False)
        attempts = engine.store.attempts(partition(task.key), task.key)

    first, second = attempts
    assert (first.outcome, first.exit_code) == (AttemptOutcome.FAILED, 3)
    assert "exited with code 3" in (first.error or "")
    assert (second.outcome, second.exit_code) == (AttemptOutcome.SUCCEEDED, 0)
    assert first.log_path is not None and second.log_path is not None
    assert Path(first.log_path).read_text() == "try 1\n"
    assert Path(second.log_path).read_text() == "try 2\n"


def test_a_timed_out_attempt_is_recorded_as_timed_out(data_dir):
    settings = EngineSettings(
        pool_size=2,
        retry=RetryPolicy(max_attempts=1, base_delay_s=0.01, jitter=0.0),
        task_timeout_s=0.2,
        load_interval_ms=100,
    )

    def slow(task, context):
        context.cancelled.wait(10)
        context.raise_if_cancelled()

    with embedded_engine(slow, data_dir=data_dir, settings=settings) as engine:
        task = Task("slow", soon(), "t")
        engine.client.schedule_task(task).result(timeout=10)
        engine.join(raise_failures=False)
        status = engine.store.fetch_statuses(partition(task.key), [task.key])[task.key]
        (attempt,) = engine.store.attempts(partition(task.key), task.key)

    assert status.state is TaskState.FAILED
    assert attempt.outcome is AttemptOutcome.TIMED_OUT
    # The timeout's timer is armed just before the attempt records its start, so the recorded
    # duration may fall a millisecond or two short of the 200 ms timeout.
    assert attempt.duration_ms is not None and 150 <= attempt.duration_ms < 10_000


def test_a_task_a_dead_worker_left_running_is_closed_as_interrupted_and_run_again(
    data_dir, caplog: pytest.LogCaptureFixture
):
    """The store as a worker killed mid-attempt leaves it: the schedule row, a RUNNING status
    and the open attempt's record. The next owner closes that attempt and runs the task."""
    task = Task("orphan", soon(-60_000), "k", {"v": 1})
    started_ms = task.scheduled_ms + 5
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    store = SqliteTaskStore(path=str(Path(data_dir) / "store.db"))
    store.open()
    p = partition(task.key)
    store.write_tasks(p, [task])
    opened = Attempt(1, started_ms, worker="dead-worker", log_path="/logs/orphan-1.out")
    store.record_statuses(
        p,
        [TaskStatus(task.key, TaskState.RUNNING, 1, updated_ms=started_ms, attempt_log=(opened,))],
    )
    store.close()

    recorder = Recorder()
    caplog.set_level(logging.INFO, logger="scheduler.tasks")
    interrupted_before = REGISTRY.get_sample_value("scheduler_tasks_interrupted_total") or 0
    with embedded_engine(recorder, data_dir=data_dir, partitions=PARTITIONS) as engine:
        engine.join()
        worker = engine.worker.client_id
        status = engine.store.fetch_statuses(p, [task.key])[task.key]
        attempts = engine.store.attempts(p, task.key)

    assert recorder.calls == [(task.key, 2, {"v": 1})]
    assert (status.state, status.attempts) == (TaskState.SUCCEEDED, 2)
    first, second = attempts
    assert first.outcome is AttemptOutcome.INTERRUPTED
    assert (first.started_ms, first.worker, first.log_path) == (
        started_ms,
        "dead-worker",
        "/logs/orphan-1.out",
    )
    assert first.ended_ms is not None and first.ended_ms > started_ms
    assert "died or was stopped" in (first.error or "")
    assert (second.outcome, second.worker) == (AttemptOutcome.SUCCEEDED, worker)
    assert (REGISTRY.get_sample_value("scheduler_tasks_interrupted_total") or 0) == (
        interrupted_before + 1
    )
    assert any(
        r.levelno == logging.WARNING and f"task {task.key} attempt 1 interrupted" in r.getMessage()
        for r in caplog.records
    )


def test_a_task_a_worker_stopped_past_its_deadline_is_interrupted_and_rerun_by_the_next(
    data_dir,
):
    settings = EngineSettings(
        pool_size=2,
        retry=TEST_SETTINGS.retry,
        shutdown_deadline_s=0.2,
        load_interval_ms=100,
    )
    stuck = Recorder()
    stuck.block = lambda task: True  # never released: runs until cancelled
    task = Task("long", soon(), "job")
    with embedded_engine(stuck, data_dir=data_dir, settings=settings) as first:
        first.client.schedule_task(task).result(timeout=10)
        assert stuck.started[task.key].wait(10)
        stopped_by = first.worker.client_id
    # Stopped past its deadline: the attempt was cancelled, the task is not done.
    store = SqliteTaskStore(path=str(Path(data_dir) / "store.db"))
    store.open(create_schema=False)
    try:
        status = store.fetch_statuses(partition(task.key), [task.key])[task.key]
        (closed,) = store.attempts(partition(task.key), task.key)
    finally:
        store.close()
    assert (status.state, status.attempts) == (TaskState.PENDING, 1)
    assert (closed.outcome, closed.worker) == (AttemptOutcome.INTERRUPTED, stopped_by)

    done = threading.Event()
    with embedded_engine(lambda t, c: done.set(), data_dir=data_dir, settings=settings) as second:
        assert done.wait(10)
        second.join()
        status = second.store.fetch_statuses(partition(task.key), [task.key])[task.key]
        attempts = second.store.attempts(partition(task.key), task.key)
    assert (status.state, status.attempts) == (TaskState.SUCCEEDED, 2)
    assert [a.outcome for a in attempts] == [AttemptOutcome.INTERRUPTED, AttemptOutcome.SUCCEEDED]


@pytest.mark.parametrize(
    ("level", "task_level", "written"),
    [("INFO", "INFO", True), ("INFO", "WARNING", False), ("WARNING", "INFO", False)],
)
def test_the_per_task_line_follows_the_task_log_level_and_the_log_level(
    data_dir, level: str, task_level: str, written: bool
):
    import io

    from scheduler.logging_setup import configure_logging

    root, tasks = logging.getLogger(), logging.getLogger("scheduler.tasks")
    kept = (root.level, list(root.handlers), tasks.level)
    stream = io.StringIO()
    configure_logging(level, "json", stream, task_level=task_level)
    try:
        with embedded_engine(Recorder(), data_dir=data_dir) as engine:
            task = Task("logged", soon(), "k")
            engine.client.schedule_task(task).result(timeout=10)
            engine.join()
    finally:
        root.setLevel(kept[0])
        root.handlers[:] = kept[1]
        tasks.setLevel(kept[2])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    mine = [line for line in lines if line["logger"] == "scheduler.tasks"]
    if not written:
        assert mine == []
        return
    (line,) = mine
    assert line["level"] == "INFO" and line["task"] == str(task.key)
    assert (line["outcome"], line["attempt"]) == ("succeeded", 1)
    assert line["duration_s"] >= 0 and line["message"].startswith(f"task {task.key} succeeded")


def test_an_unwritten_status_replaced_by_a_later_one_hands_it_its_attempt_records():
    from scheduler.actors.unflushed import UnflushedStatuses

    key = TaskKey.from_ms("o", 1, "u")
    buffer = UnflushedStatuses()
    buffer.put([TaskStatus(key, TaskState.RUNNING, 1, attempt_log=(Attempt(1, 10, worker="w"),))])
    ended = Attempt(1, ended_ms=20, outcome=AttemptOutcome.FAILED, exit_code=1, error="e")
    buffer.put([TaskStatus(key, TaskState.RETRYING, 1, "e", 30, attempt_log=(ended,))])
    buffer.put([TaskStatus(key, TaskState.RUNNING, 2, attempt_log=(Attempt(2, 31, worker="w"),))])

    (waiting,) = buffer.waiting()
    assert (waiting.state, waiting.attempts) == (TaskState.RUNNING, 2)
    assert waiting.attempt_log == (
        Attempt(1, 10, 20, AttemptOutcome.FAILED, 1, "e", "w"),
        Attempt(2, 31, worker="w"),
    )
