"""The group's committed offsets are read by an idle consumer of the group, not by the admin
client, whose ListConsumerGroupOffsets crashed workers on a moved coordinator (librdkafka issue
5040, docs/reliability.md); against a real broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from scheduler.logs.kafka import KafkaTaskLog
from tests.logs.test_kafka_log import Recorder, key_for, poll_until
from tests.servers import kafka_bootstrap

pytestmark = pytest.mark.kafka

PARTITIONS = 4


@pytest.fixture
def kafka_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[KafkaTaskLog]:
    log = KafkaTaskLog(bootstrap_servers=kafka_bootstrap(), topic=f"test-{uuid.uuid4().hex}")
    log.ensure_topic(PARTITIONS)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the admin client's ListConsumerGroupOffsets was asked")

    monkeypatch.setattr(log._admin, "list_consumer_group_offsets", refuse)
    yield log
    log.delete_topic()
    log.close()


def commit_in_group(log: KafkaTaskLog, group: str, offsets: dict[int, int], note: str) -> None:
    """Commit `offsets` as a worker of `group` does (with a mark as metadata), then leave."""
    producer = log.producer()
    for partition, offset in offsets.items():
        for _ in range(offset + 1):
            producer.send(key_for(partition, PARTITIONS), b"{}")
    assert producer.flush(10) == 0
    producer.close()
    consumer = log.consumer(group, client_id="worker")
    consumer.subscribe(Recorder())
    poll_until(consumer, lambda _: consumer.assignment() == set(range(PARTITIONS)))
    consumer.commit(offsets, metadata=dict.fromkeys(offsets, note))
    consumer.close()


def test_describe_group_reads_each_partitions_committed_offset_and_its_metadata(
    kafka_log: KafkaTaskLog,
) -> None:
    group = f"g-{uuid.uuid4().hex}"
    commit_in_group(kafka_log, group, {0: 3, 2: 1}, note="mark-7")

    lags = {lag.partition: lag for lag in kafka_log.describe_group(group)}

    assert {p: lag.committed for p, lag in lags.items()} == {0: 3, 1: None, 2: 1, 3: None}
    assert {p: lag.metadata for p, lag in lags.items()} == {0: "mark-7", 1: "", 2: "mark-7", 3: ""}
    assert {p: lag.end for p, lag in lags.items()} == {0: 4, 1: 0, 2: 2, 3: 0}


def test_describe_group_answers_as_the_admin_clients_offsets_did(kafka_log: KafkaTaskLog) -> None:
    group = f"g-{uuid.uuid4().hex}"
    commit_in_group(kafka_log, group, {1: 2, 3: 5}, note="")
    wanted = [TopicPartition(kafka_log.topic, p) for p in range(PARTITIONS)]
    request = [ConsumerGroupTopicPartitions(group, wanted)]
    admin = AdminClient(kafka_log.admin_settings())  # one broker: its coordinator stays put
    answer = admin.list_consumer_group_offsets(request)[group].result(timeout=10)
    admins = {tp.partition: tp.offset if tp.offset >= 0 else None for tp in answer.topic_partitions}

    ours = {lag.partition: lag.committed for lag in kafka_log.describe_group(group, [3, 1, 0])}

    assert admins == {0: None, 1: 2, 2: None, 3: 5}
    assert ours == {p: admins[p] for p in (0, 1, 3)}


def test_a_new_group_has_no_committed_offsets(kafka_log: KafkaTaskLog) -> None:
    lags = kafka_log.describe_group(f"new-{uuid.uuid4().hex}")

    assert [(lag.partition, lag.committed, lag.owner) for lag in lags] == [
        (p, None, None) for p in range(PARTITIONS)
    ]


def test_the_offset_reader_never_joins_the_group(kafka_log: KafkaTaskLog) -> None:
    group = f"g-{uuid.uuid4().hex}"
    kafka_log.describe_group(group)  # leaves its consumer of the group open
    worker = kafka_log.consumer(group, client_id="worker")
    worker.subscribe(Recorder())

    # Alone in the group, the worker takes every partition, and it is the only owner shown.
    poll_until(worker, lambda _: worker.assignment() == set(range(PARTITIONS)))
    assert {lag.owner for lag in kafka_log.describe_group(group)} == {"worker"}
    worker.close()
