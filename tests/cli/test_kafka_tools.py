"""`scheduler services kafka-tool`: Kafka's own tools, run from Maven jars, see what the scheduler
sees (docs/kafka.md, "Inspecting the group")."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler.services.kafka_tools import TOOLS, names_server, tool_class, with_bootstrap
from tests.cli.helpers import wait_for


def test_a_tool_is_named_as_in_kafkas_bin_with_or_without_prefix_and_suffix():
    group_command = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    for name in ("consumer-groups", "kafka-consumer-groups", "kafka-consumer-groups.sh"):
        assert tool_class(name) == group_command
    assert set(TOOLS) >= {"kafka-consumer-groups", "kafka-topics", "kafka-console-consumer"}


def test_an_unknown_tool_is_refused_with_the_names_that_exist(run):
    result = run("services", "kafka-tool", "consumer-group")
    assert result.exit_code == 1
    assert "unknown Kafka tool 'consumer-group'" in result.output
    assert "consumer-groups, topics" in result.output


def test_the_tool_gets_the_schedulers_kafka_unless_its_arguments_name_a_server():
    assert with_bootstrap(["--list"], "k:9092") == ["--bootstrap-server", "k:9092", "--list"]
    for named in (
        ["--bootstrap-server", "other:9092", "--list"],
        ["--list", "--bootstrap-server=other:9092"],
        ["--bootstrap-controller", "c:9093", "--describe"],
    ):
        assert names_server(named)
        assert with_bootstrap(named, "k:9092") == named
    # An option's value that happens to read like the option is not the option.
    assert not names_server(["--topic", "bootstrap-server"])


def test_an_unreachable_kafka_is_named_in_seconds_not_after_the_tools_30_s_timeout(
    run, monkeypatch
):
    with socket.socket() as probe:  # a port nobody listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
        monkeypatch.setenv("SCHEDULER_KAFKA_BOOTSTRAP", address)
        result = run("services", "kafka-tool", "consumer-groups", "--list")
    assert result.exit_code == 1
    assert f"nothing answers at '{address}' (SCHEDULER_KAFKA_BOOTSTRAP)" in result.output
    assert "scheduler services up" in result.output


@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.slow
def test_kafkas_consumer_group_tool_shows_the_offsets_and_owners_group_status_shows(
    script, worker, distributed
):
    from scheduler.client import SchedulerClient
    from scheduler.config import load_settings
    from scheduler.model import Task
    from scheduler.runtime import build_log

    assert script("schema", "apply").returncode == 0
    assert script("topic", "create").returncode == 0
    due = datetime.now(UTC) + timedelta(hours=1)  # pending throughout: stored, committed
    with SchedulerClient(log=build_log(load_settings())) as client:
        futures = [client.schedule_task(Task(f"acct-{n % 7}", due, f"t{n}")) for n in range(40)]
        assert all(future.result(60) is not None for future in futures)
    running = worker()

    def settled_status() -> list[dict[str, Any]]:
        status = script("group", "status", "--json")
        assert status.returncode == 0, status.stderr
        rows: list[dict[str, Any]] = json.loads(status.stdout)
        owned = all(row["owner"] for row in rows)
        stored = sum(row["committed"] or 0 for row in rows) == 40
        return rows if owned and stored else []

    rows = wait_for(settled_status, timeout=90)
    assert rows, "the worker did not own and commit every partition within 90 s"

    described = script(
        "services",
        "kafka-tool",
        "consumer-groups",
        "--describe",
        "--group",
        distributed["SCHEDULER_GROUP_ID"],
        timeout=120,
    )
    assert described.returncode == 0, described.stderr
    lines = [line.split() for line in described.stdout.splitlines() if line.strip()]
    header = lines[0]
    assert header[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    assert header[-1] == "CLIENT-ID"
    shown = {
        int(line[2]): (line[3], line[4], line[5], line[-1])
        for line in lines[1:]
        if line[1] == distributed["SCHEDULER_TOPIC"]
    }
    expected = {
        row["partition"]: (
            "-" if row["committed"] is None else str(row["committed"]),
            str(row["end"]),
            str(row["lag"]),
            row["owner"],
        )
        for row in rows
    }
    assert shown == expected

    running.terminate()
    assert running.wait(timeout=60) == 0
