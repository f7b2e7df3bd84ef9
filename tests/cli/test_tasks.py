"""`scheduler tasks`: listing, showing, and admin changes refused in the wrong state."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.cli.keys import iso
from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.model import Task, TaskState, TaskStatus
from scheduler.partitioning import partition_for
from scheduler.stores.sqlite import SqliteTaskStore

PARTITIONS = 4


@pytest.fixture
def tasks_in_store(embedded):
    """One pending and one FAILED task, written the way a worker would have."""
    embedded.mkdir(parents=True, exist_ok=True)
    log = EmbeddedTaskLog(path=str(embedded / "log.db"), topic="scheduler-tasks")
    log.ensure_topic(PARTITIONS)
    log.close()
    store = SqliteTaskStore(path=str(embedded / "store.db"))
    store.open()
    store.claim_meta("partition_count", str(PARTITIONS))
    due = datetime.now(UTC) + timedelta(hours=1)
    pending = Task("orders-1", due, "pending-one", {"n": 1})
    failed = Task("orders-1", due - timedelta(hours=2), "failed-one", {"n": 2})
    partition = partition_for(b"orders-1", PARTITIONS)
    store.write_tasks(partition, [pending, failed])
    store.record_statuses(
        partition,
        [TaskStatus(failed.key, TaskState.FAILED, attempts=5, last_error="boom", data=failed.data)],
    )
    store.close()
    return {"pending": pending, "failed": failed, "partition": partition}


def key_args(task: Task) -> list[str]:
    return [task.ordering_id, iso(task.scheduled_ms), task.uniqueness_key]


def log_end(embedded, partition: int) -> int:
    log = EmbeddedTaskLog(path=str(embedded / "log.db"), topic="scheduler-tasks")
    try:
        return next(lag.end for lag in log.describe_group("x") if lag.partition == partition)
    finally:
        log.close()


def test_list_shows_pending_and_failed_tasks_in_schedule_order(run, tasks_in_store):
    result = run("tasks", "list", "--ordering-id", "orders-1", "--json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert [(t["uniqueness_key"], t["state"]) for t in listed] == [
        ("failed-one", "failed"),
        ("pending-one", "pending"),
    ]
    assert listed[0]["last_error"] == "boom"


def test_list_filters_by_state(run, tasks_in_store):
    result = run("tasks", "list", "--state", "failed")
    assert result.exit_code == 0
    assert "failed-one" in result.output and "pending-one" not in result.output


def test_list_refuses_an_ordering_id_and_a_partition_together(run, embedded):
    result = run("tasks", "list", "--ordering-id", "o", "--partition", "1")
    assert result.exit_code == 2 and "not both" in result.output


def test_show_prints_one_task_and_names_a_missing_one(run, tasks_in_store):
    shown = run("tasks", "show", *key_args(tasks_in_store["failed"]), "--json")
    assert json.loads(shown.output)["attempts"] == 5
    epoch_ms = str(tasks_in_store["pending"].scheduled_ms)
    assert "pending" in run("tasks", "show", "orders-1", epoch_ms, "pending-one").output
    missing = run("tasks", "show", "orders-1", epoch_ms, "nope")
    assert missing.exit_code == 4  # not found
    assert "no task orders-1" in missing.output and "tasks list --ordering-id" in missing.output


def test_cancel_is_refused_for_a_failed_task(script, tasks_in_store, embedded):
    before = log_end(embedded, tasks_in_store["partition"])
    result = script("tasks", "cancel", *key_args(tasks_in_store["failed"]))
    assert result.returncode == 5  # conflict
    assert "cannot cancel" in result.stderr and "it has failed" in result.stderr
    assert "only pending, running or retrying" in result.stderr
    assert log_end(embedded, tasks_in_store["partition"]) == before


def test_retry_and_drop_are_refused_for_a_pending_task(run, tasks_in_store):
    for verb in ("retry", "drop"):
        result = run("tasks", verb, *key_args(tasks_in_store["pending"]))
        assert result.exit_code == 5  # conflict
        assert f"cannot {verb}" in result.output and "only failed tasks" in result.output


def test_one_refused_key_stops_the_whole_request(run, tasks_in_store, embedded):
    before = log_end(embedded, tasks_in_store["partition"])
    both = key_args(tasks_in_store["failed"]) + key_args(tasks_in_store["pending"])
    result = run("tasks", "retry", *both)
    assert result.exit_code == 5 and "nothing was changed" in result.output
    assert log_end(embedded, tasks_in_store["partition"]) == before


def test_retry_of_a_failed_task_goes_onto_the_log(run, tasks_in_store, embedded):
    before = log_end(embedded, tasks_in_store["partition"])
    result = run("tasks", "retry", *key_args(tasks_in_store["failed"]))
    assert result.exit_code == 0, result.output
    assert "retry requested for orders-1" in result.output
    assert log_end(embedded, tasks_in_store["partition"]) == before + 1


def test_cancel_of_a_pending_task_goes_onto_the_log(run, tasks_in_store, embedded):
    result = run("tasks", "cancel", *key_args(tasks_in_store["pending"]))
    assert result.exit_code == 0, result.output
    assert "cancel requested" in result.output


def test_keys_must_come_in_threes(run, embedded):
    result = run("tasks", "drop", "orders-1", "2030-01-01T00:00:00Z")
    assert result.exit_code == 2 and "ORDERING_ID TIME UNIQUENESS_KEY" in result.output


def test_a_key_time_without_a_zone_is_refused(run, embedded):
    result = run("tasks", "cancel", "orders-1", "2030-01-01T00:00:00", "k")
    assert result.exit_code == 2 and "has no time zone" in result.output
