"""How the consumer that reads a group's committed offsets (`kafka_committed`) says why it got
no answer, with a stand-in for librdkafka's consumer (the real one: test_kafka_committed.py)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from scheduler.logs.kafka_committed import CommittedOffsets


class QueuedError:
    """What `Consumer.poll` returns for an error it queued."""

    def __init__(self, code: int) -> None:
        self._error = KafkaError(code)

    def error(self) -> KafkaError:
        return self._error


class TimingOutConsumer:
    """A consumer whose `committed` times out, with `queued` waiting to be polled."""

    def __init__(self, queued: list[QueuedError]) -> None:
        self.queued = list(queued)
        self.asked = 0
        self.closed = False

    def committed(self, partitions: list[TopicPartition], timeout: float) -> Any:
        self.asked += 1
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    def poll(self, timeout: float) -> QueuedError | None:
        return self.queued.pop(0) if self.queued else None

    def close(self) -> None:
        self.closed = True


def reader(consumers: list[TimingOutConsumer]) -> CommittedOffsets:
    made = iter(consumers)
    return CommittedOffsets(
        lambda group: {"group.id": group},
        request_timeout_s=1,
        new_consumer=lambda _: cast(Consumer, next(made)),
    )


def test_a_group_the_user_may_not_describe_is_said_as_the_refusal_not_as_a_timeout() -> None:
    refused = TimingOutConsumer([QueuedError(KafkaError.GROUP_AUTHORIZATION_FAILED)])
    offsets = reader([refused])

    with pytest.raises(KafkaException) as raised:
        offsets.read("g", [TopicPartition("t", 0)])

    assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert refused.asked == 1, "a refusal is not asked again with a new consumer"


def test_a_timeout_without_a_refusal_is_asked_once_more_with_a_new_consumer() -> None:
    first = TimingOutConsumer([QueuedError(KafkaError._TRANSPORT)])
    second = TimingOutConsumer([])
    offsets = reader([first, second])

    with pytest.raises(KafkaException) as raised:
        offsets.read("g", [TopicPartition("t", 0)])

    assert raised.value.args[0].code() == KafkaError._TIMED_OUT
    assert (first.asked, first.closed, second.asked) == (1, True, 1)
    offsets.close()
    assert second.closed
