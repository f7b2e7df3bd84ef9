"""The CLI against real Kafka and Cassandra: schema, enqueue, a worker, admin changes, status."""

from __future__ import annotations

import json
import time

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]


def wait_for(check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.3)


def test_the_cli_runs_the_distributed_mode_end_to_end(script, worker, distributed):
    applied = script("schema", "apply")
    assert applied.returncode == 0, applied.stderr
    assert distributed["SCHEDULER_CASSANDRA_KEYSPACE"] in applied.stdout

    enqueued = script("enqueue", "orders-1", "--in", "1h", "--key", "k1", "--json")
    assert enqueued.returncode == 0, enqueued.stderr
    task = json.loads(enqueued.stdout)
    key = [task["ordering_id"], task["scheduled_time"], task["uniqueness_key"]]

    running = worker()

    def listed_states() -> list[str]:
        result = script("tasks", "list", "--ordering-id", "orders-1", "--json")
        assert result.returncode == 0, result.stderr
        return [row["state"] for row in json.loads(result.stdout)]

    assert wait_for(listed_states) == ["pending"]

    refused = script("tasks", "retry", *key)
    assert refused.returncode == 2 and "only failed tasks" in refused.stderr

    cancelled = script("tasks", "cancel", *key)
    assert cancelled.returncode == 0, cancelled.stderr
    assert wait_for(lambda: listed_states() == ["cancelled"])

    status = script("group", "status", "--json")
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)
    assert [row["partition"] for row in rows] == [0, 1, 2, 3]
    assert all(row["owner"] for row in rows)
    assert sum(row["lag"] for row in rows) == 0

    running.terminate()
    assert running.wait(timeout=60) == 0


def test_an_unreachable_kafka_is_named_with_exit_status_3(script, distributed, monkeypatch):
    monkeypatch.setenv("SCHEDULER_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    result = script("enqueue", "orders-1", "--in", "1h", timeout=120)
    assert result.returncode == 3, result.stderr
    assert "127.0.0.1:1" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_worker_runs_tasks_on_a_secured_cassandra(script, worker, distributed, monkeypatch):
    """Password login as a role that is not a superuser, mutual TLS: the settings a production
    cluster needs, from the environment, through every command that touches the store."""
    from tests.servers import secured_cassandra, secured_cassandra_role

    role = secured_cassandra_role()
    monkeypatch.delenv("SCHEDULER_CASSANDRA_PORT")
    for name, value in secured_cassandra().settings_env(role).items():
        monkeypatch.setenv(name, value)

    shown = script("settings", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["cassandra_password"] == "***"
    assert role.password not in shown.stdout

    assert script("schema", "apply").returncode == 0
    enqueued = script("enqueue", "secured-1", "--in", "1s", "--key", "k1")
    assert enqueued.returncode == 0, enqueued.stderr
    running = worker()

    def states() -> list[str]:
        listed = script("tasks", "list", "--ordering-id", "secured-1", "--json")
        assert listed.returncode == 0, listed.stderr
        return [row["state"] for row in json.loads(listed.stdout)]

    assert wait_for(lambda: states() == ["succeeded"]), states()
    running.terminate()
    assert running.wait(timeout=60) == 0
