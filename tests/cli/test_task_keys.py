"""Every command that takes a task key takes it as logs and the CLI print it, and as three
values; what they print is that same form."""

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
def failed(embedded):
    """Two FAILED tasks of an ordering id with a `/` in it, written as a worker would have."""
    embedded.mkdir(parents=True, exist_ok=True)
    log = EmbeddedTaskLog(path=str(embedded / "log.db"), topic="scheduler-tasks")
    log.ensure_topic(PARTITIONS)
    log.close()
    store = SqliteTaskStore(path=str(embedded / "store.db"))
    store.open()
    store.claim_meta("partition_count", str(PARTITIONS))
    due = datetime.now(UTC).replace(microsecond=123_000) - timedelta(hours=1)
    tasks = [Task("clicks/eu", due, "run/1", {"n": 1}), Task("clicks/eu", due, "run/2", {"n": 2})]
    partition = partition_for(b"clicks/eu", PARTITIONS)
    store.write_tasks(partition, tasks)
    store.record_statuses(
        partition,
        [
            TaskStatus(t.key, TaskState.FAILED, attempts=3, last_error="boom", data=t.data)
            for t in tasks
        ],
    )
    store.close()
    return tasks


def test_show_takes_the_key_as_a_log_prints_it(run, failed):
    printed = str(failed[0].key)
    assert printed.startswith("clicks/eu/") and printed.endswith(".123Z/run/1")
    result = run("tasks", "show", printed, "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert (shown["key"], shown["uniqueness_key"], shown["state"]) == (printed, "run/1", "failed")


def test_show_still_takes_the_three_values_of_a_listed_row(run, failed):
    task = failed[1]
    result = run("tasks", "show", task.ordering_id, iso(task.scheduled_ms), task.uniqueness_key)
    assert result.exit_code == 0, result.output
    assert "run/2" in result.output


def test_show_takes_the_epoch_millisecond_form_of_older_logs(run, failed):
    key = failed[0].key
    result = run("tasks", "show", f"{key.ordering_id}/{key.scheduled_ms}/{key.uniqueness_key}")
    assert result.exit_code == 0, result.output


def test_retry_takes_both_forms_mixed_and_prints_the_keys_as_logs_do(run, failed):
    first, second = failed
    result = run(
        "tasks",
        "retry",
        str(first.key),
        second.ordering_id,
        iso(second.scheduled_ms),
        second.uniqueness_key,
    )
    assert result.exit_code == 0, result.output
    assert f"retry requested for {first.key} " in result.output
    assert f"retry requested for {second.key} " in result.output


def test_a_missing_task_is_named_in_the_form_a_command_takes(run, failed):
    missing = str(failed[0].key).replace("run/1", "run/9")
    result = run("tasks", "drop", missing)
    assert result.exit_code != 0
    assert f"no task {missing} in the store" in result.output


def test_a_key_with_a_bad_time_is_refused_with_the_time_named(run, embedded):
    result = run("tasks", "show", "orders-1/2026-02-30T00:00:00Z/k")
    assert result.exit_code == 2
    assert "'2026-02-30T00:00:00Z' is not a time" in result.output


def test_values_that_make_no_whole_key_say_both_forms(run, embedded):
    result = run("tasks", "cancel", "orders-1", "2030-01-01T00:00:00Z")
    assert result.exit_code == 2
    assert "ORDERING_ID/TIME/UNIQUENESS_KEY" in result.output
    assert "ORDERING_ID TIME UNIQUENESS_KEY" in result.output


def test_the_console_script_takes_a_key_pasted_from_its_own_output(script, failed):
    printed = str(failed[0].key)
    shown = script("tasks", "show", printed, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["key"] == printed


def test_rerun_takes_the_printed_key_and_says_what_it_would_do_in_that_form(run, failed):
    first, second = failed
    dry = run("tasks", "rerun", str(first.key), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"would rerun {first.key} (partition " in dry.output
    done = run("tasks", "rerun", str(second.key), "--data", '{"n": 3}')
    assert done.exit_code == 0, done.output
    assert f"rerun requested for {second.key} (partition " in done.output


def test_a_filter_shows_the_keys_it_selects_as_logs_print_them(run, failed):
    dry = run("tasks", "retry", "--ordering-id", "clicks/eu", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert [line.split(" (partition")[0].strip() for line in dry.output.splitlines()[1:]] == [
        str(task.key) for task in failed
    ]
    as_json = json.loads(
        run("tasks", "drop", "--ordering-id", "clicks/eu", "--dry-run", "--json").output
    )
    assert [shown["key"] for shown in as_json["first"]] == [str(task.key) for task in failed]
    neither = run("tasks", "drop")
    assert neither.exit_code == 2 and "ORDERING_ID/TIME/UNIQUENESS_KEY" in neither.output
