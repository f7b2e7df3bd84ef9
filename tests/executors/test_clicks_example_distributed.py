"""`scheduler example run` on Kafka and Cassandra: the whole pipeline, on a small day of clicks,
in a topic, group and keyspace of its own beside the configured ones.

It runs on the test session's SparkSession (the `spark_session` fixture): a process has one, and
the first to start it sets its configuration for every later test."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from scheduler.errors import ConfigurationError, PartitionCountMismatchError
from scheduler.examples.clicks.run import example_settings, main
from scheduler.programs.model import RunStatus
from scheduler.programs.runtime import open_run_store
from scheduler.runtime import build_log, open_store
from scheduler.schedules.runtime import open_schedule_store
from scheduler.settings import Settings
from tests.executors.conftest import SPARK_CONF
from tests.executors.test_clicks_example import assert_fired_as_scheduled
from tests.servers import cassandra_contact, kafka_bootstrap


def test_example_names_have_a_suffix_and_a_long_keyspace_is_cut_before_it() -> None:
    settings = Settings(topic="t", group_id="g", cassandra_keyspace="k" * 48)
    names = example_settings(settings)
    assert (names.topic, names.group_id) == ("t-example", "g-example")
    assert names.cassandra_keyspace == "k" * 40 + "_example"
    assert len(names.cassandra_keyspace) == 48


@pytest.fixture
def settings(tmp_path: Path, spark_session: Any) -> Settings:
    """Kafka and Cassandra (real servers, see tests/servers.py) under fresh names."""
    return distributed_settings(tmp_path)


def distributed_settings(tmp_path: Path) -> Settings:
    hosts, port = cassandra_contact()
    suffix = uuid4().hex[:10]
    return Settings(
        log="kafka",
        store="cassandra",
        kafka_bootstrap=kafka_bootstrap(),
        cassandra_hosts=hosts,
        cassandra_port=port,
        cassandra_keyspace=f"ex_{suffix}",
        cassandra_consistency="ONE",
        topic=f"ex-{suffix}",
        group_id=f"ex-workers-{suffix}",
        partitions=4,
        executor="spark",
        spark_master="local[2]",
        spark_conf=SPARK_CONF,
        data_dir=tmp_path / "data",
    )


@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.spark
@pytest.mark.slow
def test_the_example_runs_end_to_end_on_kafka_and_cassandra_in_names_of_its_own(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = example_settings(settings)
    try:
        main(settings, events_per_hour=100, timeout_s=600)

        out = capsys.readouterr().out
        assert_fired_as_scheduled(out)
        assert f"SCHEDULER_TOPIC={own.topic}" in out
        summaries = list((tmp_path / "data/example/clicks/out/daily").glob("day=*/summary.json"))
        assert len(summaries) == 1
        summary = json.loads(summaries[0].read_text("utf-8"))
        assert 0 < summary["events_kept"] <= summary["events_read"] == 24 * 100

        # Every run and schedule is in the example's own keyspace ...
        store = open_store(own, create_schema=False)
        try:
            runs = open_run_store(own, store, create_schema=False)
            listed = runs.list_runs(limit=1000)
            assert sorted(Counter(str(r.started_by) for r in listed).items()) == [
                ("schedule:clicks-daily", 1),
                ("schedule:clicks-hourly", 24),
                ("schedule:clicks-report", 1),
            ]
            assert {r.status for r in listed} == {RunStatus.COMPLETED}
            schedules = open_schedule_store(own, store, create_schema=False)
            assert [r.name for r in schedules.list_schedules(status="ENABLED")] == [
                "clicks-daily",
                "clicks-hourly",
                "clicks-report",
            ]
        finally:
            store.close()
        # ... and the deployment's own topic and keyspace were never created.
        log = build_log(settings)
        try:
            with pytest.raises(ConfigurationError, match="does not exist"):
                log.partition_count()
        finally:
            log.close()
        with pytest.raises(ConfigurationError, match=settings.cassandra_keyspace):
            open_store(settings, create_schema=False)
    finally:
        _drop(own)


@pytest.mark.kafka
@pytest.mark.cassandra
def test_an_earlier_runs_topic_of_another_count_is_named_as_the_examples_own(
    tmp_path: Path,
) -> None:
    settings = distributed_settings(tmp_path)
    own = example_settings(settings)
    log = build_log(own)
    try:
        log.ensure_topic(3)  # an earlier run, with SCHEDULER_PARTITIONS=3
    finally:
        log.close()
    try:
        with pytest.raises(PartitionCountMismatchError) as refused:
            main(settings, events_per_hour=100, timeout_s=60)  # refused before Spark starts
        message = str(refused.value)
        assert f"topic {own.topic!r} has 3 partitions" in message
        assert "are the example's own, made by an earlier run" in message
        assert f"--delete --topic {own.topic}" in message
    finally:
        _drop(own)


def _drop(settings: Settings) -> None:
    log = build_log(settings)
    try:
        log.delete_topic()  # type: ignore[attr-defined]  # a KafkaTaskLog
    finally:
        log.close()
    store = open_store(settings, create_schema=False)
    try:
        store.drop_keyspace()  # type: ignore[attr-defined]  # a CassandraTaskStore
    finally:
        store.close()
