"""`scheduler topic create`: the task topic made ahead of producers, with the configured count."""

from __future__ import annotations

import pytest


def test_topic_create_makes_the_embedded_topic_once_and_refuses_another_count(
    run, embedded, monkeypatch
):
    created = run("topic", "create")
    assert created.exit_code == 0, created.output
    assert "has 4 partitions" in created.output
    assert run("topic", "create").exit_code == 0  # idempotent

    monkeypatch.setenv("SCHEDULER_PARTITIONS", "8")
    refused = run("topic", "create")
    assert refused.exit_code == 2
    assert "4 partitions but SCHEDULER_PARTITIONS=8" in refused.output


@pytest.mark.kafka
@pytest.mark.cassandra
def test_a_producer_can_start_once_topic_create_made_the_kafka_topic(run, distributed):
    from scheduler.client import SchedulerClient
    from scheduler.config import load_settings
    from scheduler.errors import ConfigurationError
    from scheduler.runtime import build_log

    log = build_log(load_settings())
    try:
        with pytest.raises(ConfigurationError, match="scheduler topic create"):
            SchedulerClient(log=log)
        created = run("topic", "create")
        assert created.exit_code == 0, created.output
        assert f"topic {distributed['SCHEDULER_TOPIC']!r}" in created.output
        assert log.partition_count() == 4
        SchedulerClient(log=log).close()
    finally:
        log.close()
