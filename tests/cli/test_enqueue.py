"""`scheduler enqueue` and what the store shows afterwards."""

from __future__ import annotations

import json
import time

import pytest

from scheduler.partitioning import partition_for
from tests.cli.helpers import wait_for


def test_an_at_time_without_a_time_zone_is_rejected(run, embedded):
    result = run("enqueue", "orders-1", "--at", "2030-01-01T10:00:00")
    assert result.exit_code == 2
    assert "has no time zone" in result.output
    assert "2030-01-01T10:00:00Z" in result.output  # says how to write it
    assert not (embedded / "log.db").exists() or "enqueued" not in result.output


def test_a_time_beyond_the_grace_window_is_rejected(run, embedded):
    result = run("enqueue", "orders-1", "--at", "2020-01-01T00:00:00Z")
    assert result.exit_code == 2
    assert "in the past" in result.output and "grace window" in result.output


def test_data_must_be_a_json_object(run, embedded):
    assert "not valid JSON" in run("enqueue", "o", "--data", "{nope").output
    assert "must be a JSON object" in run("enqueue", "o", "--data", "[1, 2]").output


def test_data_nested_too_deeply_is_refused_with_a_clear_error(run, embedded, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    result = run("enqueue", "o", "--data-file", str(deep))
    assert result.exit_code == 2
    assert "--data-file is nested too deeply" in result.output
    assert "enqueued" not in result.output


def test_at_and_in_together_are_refused(run, embedded):
    result = run("enqueue", "o", "--at", "2030-01-01T00:00:00Z", "--in", "5m")
    assert result.exit_code == 2 and "not both" in result.output


def test_enqueue_prints_the_key_and_the_partition(run, embedded):
    result = run("enqueue", "orders-7", "--in", "1h", "--key", "nightly", "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed["uniqueness_key"] == "nightly"
    assert printed["partition"] == partition_for(b"orders-7", 4)
    assert printed["scheduled_time"].endswith("Z")


def test_the_default_uniqueness_key_is_a_fresh_uuid(run, embedded):
    first = json.loads(run("enqueue", "o", "--in", "1h", "--json").output)
    second = json.loads(run("enqueue", "o", "--in", "1h", "--json").output)
    assert first["uniqueness_key"] != second["uniqueness_key"]
    assert len(first["uniqueness_key"]) == 36


def test_an_enqueued_task_is_listed_as_pending_once_a_worker_stored_it(script, worker, embedded):
    enqueued = script("enqueue", "orders-9", "--in", "1h", "--key", "k1", "--data", '{"n": 1}')
    assert enqueued.returncode == 0, enqueued.stderr
    assert "orders-9" in enqueued.stdout and "k1" in enqueued.stdout
    running = worker()
    deadline = time.monotonic() + 60
    while True:
        listed = script("tasks", "list", "--ordering-id", "orders-9", "--json")
        assert listed.returncode == 0, listed.stderr
        tasks = json.loads(listed.stdout)
        if tasks or time.monotonic() > deadline or running.poll() is not None:
            break
        time.sleep(0.2)
    assert [(t["uniqueness_key"], t["state"], t["data"]) for t in tasks] == [
        ("k1", "pending", {"n": 1})
    ]
    running.terminate()
    assert running.wait(timeout=30) == 0


def test_a_task_enqueued_while_the_worker_runs_is_stored(script, worker, embedded):
    running = worker()
    assert wait_for(lambda: script("group", "status", "--json").returncode == 0)
    time.sleep(1.0)  # the worker has joined; its partitions are assigned
    enqueued = script("enqueue", "orders-late", "--in", "1h", "--key", "k-late")
    assert enqueued.returncode == 0, enqueued.stderr

    def stored() -> bool:
        listed = script("tasks", "list", "--ordering-id", "orders-late", "--json")
        return bool(json.loads(listed.stdout or "[]"))

    assert running.poll() is None, f"the worker exited: {running.communicate()[1]}"
    assert wait_for(stored, timeout=15)


def test_a_task_its_executor_refuses_is_refused_before_connecting(run, embedded, monkeypatch):
    # Nothing answers on port 1: had the command connected first, this would be exit 3.
    monkeypatch.setenv("SCHEDULER_LOG", "kafka")
    monkeypatch.setenv("SCHEDULER_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "spark")
    result = run("enqueue", "orders-1", "--data", '{"args": {}}')
    assert result.exit_code == 2, result.output
    assert "has no job name" in result.output
    assert "checked against executor 'spark' (SCHEDULER_EXECUTOR)" in result.output


def test_a_refusal_by_the_default_executor_says_the_workers_may_run_another(
    run, embedded, monkeypatch
):
    """A worker started with `--executor noop` in another shell: this shell's default executor
    wants a PySpark job, and the refusal says which executor refused and what to set."""
    monkeypatch.delenv("SCHEDULER_EXECUTOR")
    result = run("enqueue", "orders-1", "--data", '{"note": "hello"}')
    assert result.exit_code == 2, result.output
    assert "checked against executor 'auto' (the default)" in result.output
    assert "set SCHEDULER_EXECUTOR here as they have it" in result.output
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "noop")
    assert run("enqueue", "orders-1", "--data", '{"note": "hello"}').exit_code == 0


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--in", "99999999999d", "is too long: the task would be due after 9999-12-31"),
        ("--in", "9000000d", "is too long: the task would be due after 9999-12-31"),
        ("--at", "99999999999999999", "is out of range: a time must lie between 0001-01-01"),
        ("--at", "-99999999999999999", "is out of range"),
    ],
)
def test_a_time_no_task_can_have_is_a_clear_error(run, embedded, option, value, says):
    result = run("enqueue", "o", option, value)
    assert result.exit_code == 2
    assert says in result.output
    assert "Traceback" not in result.output


def test_the_last_millisecond_is_kept_exactly(run, embedded):
    result = run("enqueue", "o", "--at", "253402300799999", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["scheduled_time"] == "9999-12-31T23:59:59.999Z"


def test_epoch_seconds_given_to_at_are_refused_saying_it_takes_milliseconds(run, embedded):
    result = run("enqueue", "o", "--at", "1795732512")
    assert result.exit_code == 2
    assert "--at takes milliseconds, not seconds" in result.output
    assert "read as epoch milliseconds is 1970-01-21T18:48:52.512Z" in result.output
    assert "give 1795732512000 or 2026-11-26T22:35:12.000Z" in result.output


def test_a_negative_in_is_refused_as_negative_not_as_an_unreadable_duration(run, embedded):
    result = run("enqueue", "o", "--in", "-5s")
    assert result.exit_code == 2
    assert "'-5s' is negative" in result.output and "not a duration" not in result.output
    assert "a positive one such as 5s, or a time with --at" in result.output
