"""`schedule_task` refuses bad tasks with typed, explanatory errors and writes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler import (
    InvalidTaskKeyError,
    NaiveDatetimeError,
    SchedulerClient,
    Task,
    TaskDataError,
    TaskInPastError,
    UnknownExecutorError,
)
from scheduler.logs.embedded import EmbeddedTaskLog
from tests.engine.helpers import soon


@pytest.fixture
def log(tmp_path):
    log = EmbeddedTaskLog(path=str(tmp_path / "log.db"), topic="t")
    log.ensure_topic(4)
    yield log
    log.close()


def written(log) -> int:
    return sum(lag.end for lag in log.describe_group("nobody"))


def test_a_task_too_far_in_the_past_is_refused_with_the_grace_window_in_the_message(log):
    client = SchedulerClient(log=log, grace_window_s=10)
    future = client.schedule_task(Task("o", soon(-11_000), "k"))
    with pytest.raises(TaskInPastError, match="grace window of 10s"):
        future.result()
    assert written(log) == 0


def test_a_task_within_the_grace_window_is_accepted(log):
    client = SchedulerClient(log=log, grace_window_s=10)
    client.schedule_task(Task("o", soon(-5_000), "k")).result(timeout=10)
    assert written(log) == 1


def test_a_naive_datetime_is_a_clear_error():
    with pytest.raises(NaiveDatetimeError, match="no time zone"):
        Task("o", datetime.now() + timedelta(minutes=1), "k")


@pytest.mark.parametrize(
    ("ordering_id", "uniqueness_key", "message"),
    [
        ("", "k", "ordering_id is empty"),
        ("o", "  ", "uniqueness_key is empty"),
        ("o\x00", "k", "NUL"),
        ("x" * 600, "k", "longer than 512"),
        (42, "k", "must be a string"),
    ],
)
def test_unusable_ids_are_refused(ordering_id, uniqueness_key, message):
    with pytest.raises(InvalidTaskKeyError, match=message):
        Task(ordering_id, soon(), uniqueness_key)


def test_data_that_is_not_json_is_refused(log):
    client = SchedulerClient(log=log)
    with pytest.raises(TaskDataError, match="cannot be serialised as JSON"):
        client.schedule_task(Task("o", soon(), "k", {"when": datetime.now()})).result()
    assert written(log) == 0


def test_data_over_the_size_limit_is_refused(log):
    client = SchedulerClient(log=log, max_data_bytes=1000)
    with pytest.raises(TaskDataError, match="over the limit of 1000"):
        client.schedule_task(Task("o", soon(), "k", {"blob": "x" * 2000})).result()


def test_data_must_be_a_mapping():
    with pytest.raises(TaskDataError, match="must be a mapping"):
        Task("o", soon(), "k", ["not", "a", "dict"])  # type: ignore[arg-type]


def test_a_validator_refuses_unknown_executors_before_anything_is_written(log):
    def validate(task):
        if task.data.get("executor") != "noop":
            raise UnknownExecutorError(f"unknown executor {task.data.get('executor')!r}")

    client = SchedulerClient(log=log, validate=validate)
    with pytest.raises(UnknownExecutorError, match="unknown executor 'sparkk'"):
        client.schedule_task(Task("o", soon(), "k", {"executor": "sparkk"})).result()
    client.schedule_task(Task("o", soon(), "k", {"executor": "noop"})).result(timeout=10)
    assert written(log) == 1


def test_schedule_tasks_accepts_a_batch_with_one_future(log):
    client = SchedulerClient(log=log)
    tasks = [Task(f"o{i}", soon(1000), "k") for i in range(100)]
    assert client.schedule_tasks(tasks).result(timeout=10) == 100
    assert written(log) == 100


def test_schedule_tasks_writes_nothing_if_any_task_is_invalid(log):
    client = SchedulerClient(log=log)
    tasks = [Task("o", soon(1000), "k"), Task("o", soon(-60_000), "late")]
    with pytest.raises(TaskInPastError):
        client.schedule_tasks(tasks).result(timeout=10)
    assert written(log) == 0


def test_schedule_tasks_runs_the_validator_on_every_task_and_takes_any_iterable(log):
    checked = []

    def validate(task: Task) -> None:
        checked.append(task.key.uniqueness_key)
        if task.data.get("executor") == "sparkk":
            raise UnknownExecutorError("unknown executor 'sparkk'")

    client = SchedulerClient(log=log, grace_window_s=10, validate=validate)
    # A generator, of tasks due 5 s ago: inside the grace window, so they run at once.
    late = (Task("o", soon(-5_000), f"k{n}", {"executor": "noop"}) for n in range(3))
    assert client.schedule_tasks(late).result(timeout=10) == 3
    bad = [Task("o", soon(), "a"), Task("o", soon(), "b", {"executor": "sparkk"})]
    with pytest.raises(UnknownExecutorError, match="sparkk"):
        client.schedule_tasks(bad).result(timeout=10)
    assert written(log) == 3
    assert checked == ["k0", "k1", "k2", "a", "b"]


def test_check_task_refuses_what_schedule_task_would_without_a_connection():
    from scheduler.client import check_task

    check_task(Task("o", soon(-5_000), "k", {"n": 1}), grace_window_s=10)  # accepted: no error
    with pytest.raises(TaskInPastError, match="grace window of 2s"):
        check_task(Task("o", soon(-3_000), "k"), grace_window_s=2)
    with pytest.raises(TaskDataError, match="over the limit of 10"):
        check_task(Task("o", soon(), "k", {"text": "x" * 20}), max_data_bytes=10)
    with pytest.raises(TaskDataError, match="cannot be serialised"):
        check_task(Task("o", soon(), "k", {"when": datetime.now()}))

    def no_jobs(task: Task) -> None:
        raise UnknownExecutorError(f"{task.key}: no such job")

    with pytest.raises(UnknownExecutorError, match="no such job"):
        check_task(Task("o", soon(), "k"), validate=no_jobs)
