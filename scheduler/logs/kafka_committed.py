"""A consumer group's committed offsets, read by a consumer of the group that never joins it.

The admin client's ListConsumerGroupOffsets crashes the process when the coordinator answers
NOT_COORDINATOR (librdkafka issue 5040, docs/reliability.md), as it does whenever a broker stops
or starts. A consumer has the group machinery the lookup needs and retries on a moved coordinator
by itself; one that never subscribes never joins the group (no member, no rebalance).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from scheduler.logs.kafka_config import kafka_error, logger
from scheduler.logs.kafka_security import AUTHORIZATION_FAILED

OFFSETS_CLIENT_ID = "scheduler-offsets"
"""The `client.id` of the consumers that read committed offsets, in librdkafka's log lines."""


class CommittedOffsets:
    """Reads the committed offsets of consumer groups, one idle consumer per group asked.

    The consumers are kept (a worker's lag metric asks on every scrape) and closed by `close`.
    Safe to call from several threads.
    """

    def __init__(
        self,
        settings: Callable[[str], dict[str, Any]],
        *,
        request_timeout_s: float,
        new_consumer: Callable[[dict[str, Any]], Consumer] = Consumer,
    ) -> None:
        """`settings(group_id)`: the librdkafka configuration of a consumer in that group;
        `new_consumer` makes one from it (tests pass a stand-in)."""
        self._settings = settings
        self._new_consumer = new_consumer
        self._timeout = request_timeout_s
        self._lock = threading.Lock()
        self._consumers: dict[str, Consumer] = {}

    def read(self, group_id: str, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The group's committed offset and metadata of each of `partitions` (offset < 0: none
        committed). Raises `KafkaException` as `Consumer.committed` does. A consumer whose
        request timed out is replaced once and asked again: after a broker restart a long-lived
        client may hold on to a coordinator it can no longer reach (librdkafka issue 5511)."""
        for last in (False, True):
            consumer = self._consumer(group_id)
            try:
                return consumer.committed(partitions, timeout=self._timeout)
            except KafkaException as exc:
                error = kafka_error(exc)
                if not last and (error is None or error.code() != KafkaError._TIMED_OUT):
                    raise
                refused = _refusal_queued(consumer)
                if refused is not None:
                    raise KafkaException(refused) from exc
                if last:
                    raise
            logger.info("reading the offsets of group %r timed out: asking again", group_id)
            self._discard(group_id)
        raise AssertionError("unreachable: the second try returns or raises")

    def serve(self) -> None:
        """Deliver what the consumers queued (librdkafka's log lines, errors) to their
        callbacks: nothing else polls them."""
        with self._lock:
            consumers = list(self._consumers.values())
        for consumer in consumers:
            consumer.poll(0)

    def close(self) -> None:
        with self._lock:
            consumers, self._consumers = list(self._consumers.values()), {}
        for consumer in consumers:
            consumer.close()

    def _consumer(self, group_id: str) -> Consumer:
        with self._lock:
            consumer = self._consumers.get(group_id)
            if consumer is None:
                consumer = self._consumers[group_id] = self._new_consumer(self._settings(group_id))
            return consumer

    def _discard(self, group_id: str) -> None:
        with self._lock:
            consumer = self._consumers.pop(group_id, None)
        if consumer is not None:
            consumer.close()


def _refusal_queued(consumer: Consumer) -> KafkaError | None:
    """An authorization refusal the consumer queued while `committed` waited. A consumer whose
    user may not Describe the group is refused the coordinator's lookup; librdkafka queues that
    as a consumer error (delivered by `poll`) and `committed` only times out."""
    for _ in range(100):  # what is queued, not what arrives meanwhile
        message = consumer.poll(0)
        if message is None:
            return None
        error = message.error()
        if error is not None and error.code() in AUTHORIZATION_FAILED:
            return error
    return None
