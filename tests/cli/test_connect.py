"""`scheduler.connect()`: a producer's client for the deployment the workers' settings describe.

Here beside the CLI tests for their fixtures: `embedded` and `distributed` set the `SCHEDULER_*`
environment a deployment would, which `connect()` reads as a worker does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

import scheduler
from scheduler import PartitionCountMismatchError, Task
from scheduler.config import load_settings
from scheduler.partitioning import partition_for
from scheduler.runtime import build_log


def due() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


def test_connect_schedules_into_the_embedded_log_the_worker_reads(embedded):
    with scheduler.connect() as client:
        partition = client.schedule_task(Task("acct-1", due(), "k1")).result(30)
    assert partition == partition_for(b"acct-1", 4)
    log = build_log(load_settings())
    try:
        assert log.partition_count() == 4  # made by connect, with SCHEDULER_PARTITIONS
        [lag] = log.describe_group("scheduler-workers", [partition])
        assert lag.end == 1
    finally:
        log.close()


def closing_recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Have every log `connect` builds note its topic here when it is closed."""
    import scheduler.runtime

    closed: list[str] = []
    build = scheduler.runtime.build_log

    def recorded(settings):  # type: ignore[no-untyped-def]
        log = build(settings)
        close = log.close

        def noted() -> None:
            closed.append(log.topic)
            close()

        log.close = noted  # type: ignore[method-assign]
        return log

    monkeypatch.setattr(scheduler.runtime, "build_log", recorded)
    return closed


def test_the_client_closes_the_log_connect_opened(embedded, monkeypatch):
    closed = closing_recorded(monkeypatch)
    with scheduler.connect() as client:
        client.schedule_task(Task("acct-1", due(), "k1")).result(30)
        assert closed == []
    assert closed == ["scheduler-tasks"]


def test_a_topic_of_another_count_is_refused_and_its_log_closed(embedded, monkeypatch):
    scheduler.connect().close()  # the topic now has 4 partitions
    closed = closing_recorded(monkeypatch)
    monkeypatch.setenv("SCHEDULER_PARTITIONS", "8")
    with pytest.raises(
        PartitionCountMismatchError, match="4 partitions but SCHEDULER_PARTITIONS=8"
    ):
        scheduler.connect()
    assert closed == ["scheduler-tasks"]


@pytest.mark.kafka
@pytest.mark.cassandra
def test_connect_makes_the_kafka_topic_and_a_task_lands_on_its_murmur2_partition(distributed):
    with scheduler.connect() as client:
        partition = client.schedule_task(Task("acct-7", due(), "k7")).result(30)
    assert partition == partition_for(b"acct-7", 4)
    log = build_log(load_settings())
    try:
        assert log.partition_count() == 4
        [lag] = log.describe_group(distributed["SCHEDULER_GROUP_ID"], [partition])
        assert (lag.committed, lag.end) == (None, 1)
    finally:
        log.close()


@pytest.mark.parametrize(
    ("data", "refused"),
    [
        ({}, None),
        ({"executor": "command", "argv": ["echo", "hi"]}, None),
        ({"job": "my.jobs:daily"}, "unknown Spark job 'my.jobs:daily'"),
        ({"note": "hello"}, "has no job name"),
        ({"executor": "sprak"}, "names executor 'sprak'"),
    ],
)
def test_connect_and_the_cli_refuse_the_same_tasks_under_the_same_settings(
    run, data_dir, monkeypatch, data, refused
):
    monkeypatch.setenv("SCHEDULER_DATA_DIR", str(data_dir))  # executor: the default, auto
    at = due().isoformat()
    cli = run("enqueue", "o", "--at", at, "--key", "k", "--data", json.dumps(data))
    with scheduler.connect() as client:
        future = client.schedule_task(Task("o", at, "k", data))
        error = future.exception(30)
    if refused is None:
        assert cli.exit_code == 0, cli.output
        assert error is None
    else:
        assert cli.exit_code == 2 and refused in cli.output
        assert isinstance(error, scheduler.TaskRejected) and refused in str(error)
        assert str(error) in cli.output  # the very same message
