"""After each rebalance callback the consumer asks the leaders of the partitions it keeps for an
offset, which wakes librdkafka's broker threads (see `KafkaLogConsumer._wake_fetchers`).

The callbacks are driven here with a stand-in for the librdkafka handle, recording the calls in
order; what the wake-up buys is measured against a real broker in docs/kafka.md."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import OFFSET_END, KafkaError, KafkaException, TopicPartition

from scheduler.logs.kafka_config import CONSUMER_DEFAULTS, logger
from scheduler.logs.kafka_consumer import KafkaLogConsumer
from tests.logs.test_kafka_log import Recorder

TOPIC = "tasks"


class Handle:
    """The librdkafka calls a rebalance callback makes, in order."""

    def __init__(self, *, failing: bool = False) -> None:
        self.calls: list[tuple[str, list[tuple[int, int]]]] = []
        self.failing = failing

    def _note(self, name: str, partitions: list[TopicPartition]) -> None:
        self.calls.append((name, [(tp.partition, tp.offset) for tp in partitions]))

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._note("assign", partitions)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._note("unassign", partitions)

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float) -> Any:
        self._note("ask leaders", partitions)
        if self.failing:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return partitions


@pytest.fixture
def consumer() -> Any:
    # Nothing listens on port 9; the logger keeps librdkafka's connection errors off stderr.
    config = {
        **CONSUMER_DEFAULTS,
        "bootstrap.servers": "127.0.0.1:9",
        "group.id": "g",
        "logger": logger,
    }
    consumer = KafkaLogConsumer(config=config, topic=TOPIC, request_timeout_s=1)
    consumer.subscribe(Recorder())
    yield consumer
    consumer.close()


def parts(*numbers: int) -> list[TopicPartition]:
    return [TopicPartition(TOPIC, n) for n in numbers]


def test_the_kept_partitions_are_asked_for_after_a_revocation_is_unassigned(consumer) -> None:
    handle = Handle()
    consumer._on_assign(handle, parts(0, 1, 2, 3))
    handle.calls.clear()
    consumer._on_revoke(handle, parts(1, 3))
    assert [name for name, _ in handle.calls] == ["unassign", "ask leaders"]
    assert handle.calls[1][1] == [(0, OFFSET_END), (2, OFFSET_END)]  # the two kept, not the moved


def test_an_assignment_asks_for_all_partitions_once_they_are_assigned(consumer) -> None:
    handle = Handle()
    consumer._on_assign(handle, parts(2))
    consumer._on_assign(handle, parts(0))  # a second rebalance adds one
    assert [name for name, _ in handle.calls] == ["assign", "ask leaders"] * 2
    assert handle.calls[-1][1] == [(0, OFFSET_END), (2, OFFSET_END)]


def test_nothing_is_asked_once_nothing_is_kept_and_a_failed_ask_changes_nothing(consumer) -> None:
    handle = Handle(failing=True)
    consumer._on_assign(handle, parts(0, 1))  # the leaders time out: best effort, no error
    assert consumer.assignment() == {0, 1}
    handle.calls.clear()
    consumer._on_lost(handle, parts(0, 1))
    assert [name for name, _ in handle.calls] == ["unassign"]
    assert consumer.assignment() == set()
