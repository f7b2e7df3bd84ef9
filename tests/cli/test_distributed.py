"""The CLI against real Kafka and Cassandra: schema, enqueue, a worker, admin changes, status."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from itertools import repeat

import pytest

from scheduler.cli.enqueue_many import parse_line
from tests.cli.helpers import wait_for
from tests.http import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]


def scraped_lag(port: int) -> dict[str, float]:
    """`scheduler_consumer_lag_records` by partition, from the worker's /metrics."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return {}
    prefix = 'scheduler_consumer_lag_records{partition="'
    return {
        line[len(prefix) :].split('"')[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(prefix)
    }


def test_the_cli_runs_the_distributed_mode_end_to_end(script, worker, distributed, monkeypatch):
    port = free_port()
    monkeypatch.setenv("SCHEDULER_METRICS_PORT", str(port))
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
    assert refused.returncode == 5 and "only failed tasks" in refused.stderr  # conflict

    cancelled = script("tasks", "cancel", *key)
    assert cancelled.returncode == 0, cancelled.stderr
    assert wait_for(lambda: listed_states() == ["cancelled"])

    status = script("group", "status", "--json")
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)
    assert [row["partition"] for row in rows] == [0, 1, 2, 3]
    assert all(row["owner"] for row in rows)
    assert sum(row["lag"] for row in rows) == 0
    # The worker's own view of the same: asked of Kafka when scraped, for the partitions it owns.
    assert wait_for(lambda: scraped_lag(port)) == {"0": 0.0, "1": 0.0, "2": 0.0, "3": 0.0}

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


def test_a_permission_revoked_while_a_worker_runs_delays_tasks_and_loses_none(
    script, worker, distributed, monkeypatch
):
    """An operator revokes the worker's MODIFY permission while it runs, then grants it again:
    the tasks enqueued meanwhile wait in the log (the worker says why, backing off), and all of
    them run once the role may write again."""
    from datetime import UTC, datetime
    from uuid import uuid4

    from scheduler.errors import ConfigurationError
    from scheduler.model import Task
    from scheduler.stores.cassandra import CassandraTaskStore
    from tests.servers import operated_keyspace, secured_cassandra

    node = secured_cassandra()
    keyspace = distributed["SCHEDULER_CASSANDRA_KEYSPACE"]
    with operated_keyspace(keyspace) as (role, operator):
        monkeypatch.delenv("SCHEDULER_CASSANDRA_PORT")
        for name, value in node.settings_env(role).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("SCHEDULER_CREATE_SCHEMA", "false")
        monkeypatch.setenv("SCHEDULER_RESTART_BACKOFF_S", "0.2")

        def states(ordering_id: str) -> list[str]:
            listed = script("tasks", "list", "--ordering-id", ordering_id, "--json")
            assert listed.returncode == 0, listed.stderr
            return [row["state"] for row in json.loads(listed.stdout)]

        running = worker()
        assert script("enqueue", "before", "--in", "1s", "--key", "k1").returncode == 0
        assert wait_for(lambda: states("before") == ["succeeded"]), states("before")

        operator.execute(f"REVOKE MODIFY ON KEYSPACE {keyspace} FROM {role.username}")
        probe = CassandraTaskStore(
            hosts=node.hosts,
            port=node.port,
            keyspace=keyspace,
            consistency="ONE",
            credentials=role,
            tls=node.tls_options(),
        )
        probe.open(create_schema=False)

        def write_refused() -> bool:  # Cassandra caches permissions for a few seconds
            try:
                probe.write_tasks(
                    99, [Task("probe", datetime(2030, 1, 1, tzinfo=UTC), uuid4().hex)]
                )
            except ConfigurationError:
                return True
            return False

        try:
            assert wait_for(write_refused), "the revoked permission never took effect"
        finally:
            probe.close()
        keys = [f"k{n}" for n in range(5)]
        for key in keys:
            assert script("enqueue", "during", "--in", "1s", "--key", key).returncode == 0
        time.sleep(3)
        assert states("during") == []  # not in the store: waiting in the log

        operator.execute(f"GRANT MODIFY ON KEYSPACE {keyspace} TO {role.username}")
        assert wait_for(lambda: states("during") == ["succeeded"] * len(keys)), states("during")
        running.terminate()
        assert running.wait(timeout=60) == 0
        stderr = running.stderr.read()
    assert f"User {role.username} has no MODIFY permission" in stderr
    assert "probed again in" in stderr
    assert "is persisting again after" in stderr
    assert "Traceback" not in stderr


def test_a_file_of_tasks_is_sent_through_kafka_and_run(script, worker, distributed, tmp_path):
    """`enqueue-many` on the real servers: 1,500 tasks due now, in two chunks, all run once.

    One ordering id, so that their 1,500 deleted schedule rows share one Cassandra partition:
    listing them makes Cassandra warn of the tombstones it read (past 1,000), which the listing
    expects, so the operator does not see the driver's WARNING lines."""
    lines = [json.dumps({"ordering_id": "bulk", "data": {"n": n}}) for n in range(1500)]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    assert script("schema", "apply").returncode == 0
    running = worker()

    sent = script("enqueue-many", str(tmp_path / "tasks.jsonl"), "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout) | {"seconds": 0} == {
        "file": str(tmp_path / "tasks.jsonl"),
        "tasks": 1500,
        "sent": True,
        "seconds": 0,
    }

    def succeeded() -> list[tuple[str, str]]:
        result = script("tasks", "list", "--state", "succeeded", "--limit", "5000", "--json")
        assert result.returncode == 0, result.stderr
        rows = json.loads(result.stdout)
        return sorted((row["ordering_id"], row["uniqueness_key"]) for row in rows)

    # Each line's key is derived from its content, so the test knows which tasks must have run.
    tasks = map(parse_line, lines, repeat(datetime.now(UTC)))
    expected = sorted((task.ordering_id, task.uniqueness_key) for task in tasks)
    assert wait_for(lambda: len(succeeded()) >= 1500, timeout=120)
    assert succeeded() == expected
    listing = script("tasks", "list", "--ordering-id", "bulk", "--limit", "5000")
    assert listing.returncode == 0, listing.stderr
    assert "tombstone" not in listing.stderr
    assert "tombstone" in script("--log-level", "debug", "tasks", "list", "--limit", "5000").stderr
    running.terminate()
    assert running.wait(timeout=60) == 0


def test_a_mistyped_keyspace_is_refused_and_the_tasks_in_the_right_one_still_run(
    script, worker, distributed, monkeypatch
):
    """Workers create their keyspace on start, so a mistyped name made a new, empty one; the
    group's offsets were past every record, and each pending task, left in the old keyspace,
    never ran. Such a start is refused now, naming the setting."""
    from scheduler.stores.cassandra import CassandraTaskStore

    first = worker()
    enqueued = script("enqueue", "kept", "--in", "3s", "--key", "k1")
    assert enqueued.returncode == 0, enqueued.stderr

    def committed() -> bool:
        rows = json.loads(script("group", "status", "--json").stdout or "[]")
        return sum(row["committed"] or 0 for row in rows) == 1

    assert wait_for(committed)
    first.terminate()
    assert first.wait(timeout=60) == 0

    right = distributed["SCHEDULER_CASSANDRA_KEYSPACE"]
    mistyped = f"{right}_typo"
    monkeypatch.setenv("SCHEDULER_CASSANDRA_KEYSPACE", mistyped)
    try:
        refused = script("worker", timeout=120)
    finally:
        hosts = distributed["SCHEDULER_CASSANDRA_HOSTS"].split(",")
        port = int(distributed["SCHEDULER_CASSANDRA_PORT"])
        typo = CassandraTaskStore(hosts=hosts, port=port, keyspace=mistyped, consistency="ONE")
        typo.drop_keyspace()
        typo.close()
    print(f"\n[new keyspace] {refused.stderr.strip().splitlines()[-1]}")
    assert refused.returncode == 2, refused.stderr
    assert f"has already read 1 record of topic {distributed['SCHEDULER_TOPIC']!r}" in (
        refused.stderr
    )
    assert f"keyspace {mistyped!r} (SCHEDULER_CASSANDRA_KEYSPACE" in refused.stderr
    assert "Traceback" not in refused.stderr

    monkeypatch.setenv("SCHEDULER_CASSANDRA_KEYSPACE", right)
    worker()

    def kept_state() -> list[str]:
        listed = script("tasks", "list", "--ordering-id", "kept", "--json")
        return [row["state"] for row in json.loads(listed.stdout or "[]")]

    assert wait_for(lambda: kept_state() == ["succeeded"])


_LEFT_OPEN_AT_EXIT = """
import atexit, sys
import cassandra.cluster
from scheduler.cli.main import main

# Registered after the driver's own exit hook, so it runs first: the driver keeps every cluster
# that connected and was not shut down in `_clusters_for_shutdown`, and shuts them down there.
@atexit.register
def name_the_clusters_left_open():
    for cluster in cassandra.cluster._clusters_for_shutdown:
        print("left open at exit: a Cassandra cluster", file=sys.stderr)

sys.argv[0] = "scheduler"
main()
"""


@pytest.mark.parametrize("command", [["schedules", "list"], ["runs", "list"], ["jobs", "list"]])
def test_a_command_refused_for_a_missing_keyspace_leaves_no_cassandra_connection_open(
    distributed: dict[str, str], command: list[str]
) -> None:
    """A task store whose open failed kept its connection, which the caller had no store to
    close, to the interpreter's exit: when a metadata refresh fell due there (a worker making
    its keyspace meanwhile), the driver's scheduler thread printed a traceback, "RuntimeError:
    cannot schedule new futures after shutdown". The command runs as a subprocess that names,
    at its exit, the clusters still open."""
    result = subprocess.run(
        [sys.executable, "-c", _LEFT_OPEN_AT_EXIT, *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    keyspace = distributed["SCHEDULER_CASSANDRA_KEYSPACE"]
    assert result.returncode == 2, result.stderr
    assert f"keyspace {keyspace!r} does not exist" in result.stderr
    assert "left open at exit" not in result.stderr
    assert "Traceback" not in result.stderr
