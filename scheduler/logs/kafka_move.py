"""Moving a consumer group's unread records to a new topic: the way back after partitions were
added to the task topic (`scheduler topic move`).

A task's partition is `murmur2(ordering id) % partition count`, and the store keeps every task
under the partition its record came from. Adding partitions to the topic (Kafka can add them but
never remove them) sends many ordering ids to other partitions than their earlier tasks, so
workers refuse such a topic (`scheduler.runtime.topic_changed_error`). What they had not read
yet is still on it; this copies those records, keys and values unchanged, to a topic with the
count the store is partitioned into, where the same murmur2 hash puts each ordering id back on
its own partition. The store is not touched: what the workers stored stays where they read it.

Order: within one source partition the copies keep the records' order (a cancel stays after the
task it cancels). Records of one ordering id that producers put on two partitions, before and
after they learnt of the new ones, are interleaved by their timestamps, which is the only order
Kafka gives across partitions.

Once every copy is acknowledged, the group's offsets on the old topic are committed at the
point the copy ended, so running the command again moves only what arrived since (producers
still writing to the old topic). Copying a record twice, after a failure in between, is harmless:
a task's key overwrites itself, and a task that finished never runs again.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from scheduler.errors import (
    BackendUnavailableError,
    ConfigurationError,
    PartitionCountMismatchError,
)
from scheduler.logs.kafka import KafkaTaskLog
from scheduler.logs.kafka_config import reason

CLIENT_ID = "scheduler-topic-move"
_BATCH = 10_000
_POLL_EVERY = 1000


@dataclass
class MoveReport:
    """What `move_unread` copied, per partition of the old topic."""

    source: str
    target: str
    partitions: int
    """The new topic's partition count."""
    moved: dict[int, int] = field(default_factory=dict)
    """Records copied, by partition of the old topic."""
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    """The offsets copied, [first, end), by partition of the old topic."""
    deleted: dict[int, int] = field(default_factory=dict)
    """Records past the group's commit that retention deleted before they could be copied."""

    @property
    def total(self) -> int:
        return sum(self.moved.values())


def move_unread(
    source: KafkaTaskLog,
    target: KafkaTaskLog,
    group_id: str,
    partitions: int,
    *,
    stall_s: float = 60.0,
) -> MoveReport:
    """Copy what `group_id` has not committed on `source` to `target` (created with
    `partitions` if missing), then commit the group's offsets on `source` past the copies."""
    if source.topic == target.topic:
        raise ConfigurationError(
            f"--to names the group's own topic {source.topic!r}; give a new topic's name"
        )
    lags = source.describe_group(group_id)
    members = sorted({lag.owner for lag in lags if lag.owner})
    if members:
        raise ConfigurationError(
            f"group {group_id!r} still has members on topic {source.topic!r} ({', '.join(members)})"
            "; stop every worker of the group first (a killed worker leaves the group after its "
            "session timeout, 10 s by default), then run this again"
        )
    count = target.ensure_topic(partitions)
    if count != partitions:
        raise PartitionCountMismatchError(
            f"topic {target.topic!r} already exists with {count} partitions, not the {partitions} "
            "the tasks are partitioned into; name a new topic"
        )
    report = MoveReport(source=source.topic, target=target.topic, partitions=partitions)
    consumer = Consumer(source.consumer_settings(group_id, client_id=CLIENT_ID))
    try:
        starts = source.first_offsets([lag.partition for lag in lags])
        for lag in lags:
            first = starts[lag.partition]
            if lag.committed is not None and lag.committed < first:
                report.deleted[lag.partition] = first - lag.committed
            first = max(first, lag.committed or 0)
            if first < lag.end:
                report.ranges[lag.partition] = (first, lag.end)
        unread = _read(consumer, source.topic, report.ranges, stall_s)
        report.moved = {partition: len(records) for partition, records in unread.items()}
        # Each partition's records in their order; across partitions, by timestamp.
        merged = heapq.merge(*unread.values(), key=lambda message: message.timestamp()[1])
        _copy(merged, target, report.total, stall_s)
        _commit(consumer, source.topic, report)
    finally:
        consumer.close()
    return report


def _read(
    consumer: Consumer, topic: str, ranges: dict[int, tuple[int, int]], stall_s: float
) -> dict[int, list[Message]]:
    """Every record of `ranges`, by partition, in offset order."""
    unread: dict[int, list[Message]] = {partition: [] for partition in ranges}
    if not ranges:
        return unread
    consumer.assign([TopicPartition(topic, p, first) for p, (first, _) in ranges.items()])
    pending = {partition: end for partition, (_, end) in ranges.items()}
    progress_at = time.monotonic()
    while pending:
        messages = consumer.consume(_BATCH, 0.5)
        for message in messages:
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise BackendUnavailableError(f"reading topic {topic!r}: {error.str()}")
                continue  # librdkafka recovers from the rest by itself
            partition, offset = message.partition(), message.offset()
            if partition in pending and offset is not None and offset < pending[partition]:
                unread[partition].append(message)
        if messages:
            progress_at = time.monotonic()
        positions = consumer.position([TopicPartition(topic, p) for p in pending])
        for position in positions:
            if position.offset >= pending[position.partition]:
                del pending[position.partition]
        if pending and time.monotonic() - progress_at > stall_s:
            where = ", ".join(f"partition {p} before offset {end}" for p, end in pending.items())
            raise BackendUnavailableError(
                f"reading topic {topic!r} stalled for {stall_s:g} s ({where}); nothing was "
                "copied: check the brokers and run the command again"
            )
    return unread


def _copy(messages: Iterable[Message], target: KafkaTaskLog, total: int, stall_s: float) -> None:
    """Produce `messages` to `target` and wait until each is acknowledged."""
    producer = Producer(target.producer_settings())
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)

    for sent, message in enumerate(messages, 1):
        while True:
            try:
                producer.produce(
                    target.topic,
                    message.value(),
                    message.key(),
                    headers=message.headers(),
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.05)  # the local queue is full: wait for acknowledgements
            except KafkaException as exc:
                failures.append(KafkaError(KafkaError._FAIL, reason(exc)))
                break
        if not sent % _POLL_EVERY:
            producer.poll(0)
    remaining = producer.flush(stall_s)
    if remaining or failures:
        why = failures[0].str() if failures else f"not acknowledged within {stall_s:g} s"
        raise BackendUnavailableError(
            f"{len(failures) + remaining} of {total} records copied to topic {target.topic!r} "
            f"failed ({why}); nothing was marked moved: run the command again once Kafka "
            "accepts writes (records copied twice are harmless: a task's key overwrites itself)"
        )


def _commit(consumer: Consumer, topic: str, report: MoveReport) -> None:
    """Mark the copied records read on the old topic, so that a second run skips them."""
    offsets = [TopicPartition(topic, p, end) for p, (_, end) in report.ranges.items()]
    if not offsets:
        return
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        raise BackendUnavailableError(
            f"the {report.total} records were copied to topic {report.target!r}, but marking "
            f"them read on topic {topic!r} failed ({reason(exc)}); if a worker joined the group "
            "meanwhile, stop it, then run the command again (it copies them again, harmlessly)"
        ) from exc
