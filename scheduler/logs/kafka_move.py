"""Moving a consumer group's unread records to a new topic: the way back after partitions were
added to the task topic (`scheduler topic move`).

A task's partition is `murmur2(ordering id) % partition count`, and the store keeps every task
under the partition its record came from. Adding partitions to the topic (Kafka can add them but
never remove them) sends many ordering ids to other partitions than their earlier tasks, so
workers refuse such a topic (`scheduler.runtime.topic_changed_error`). What they had not read
yet is still on it; this copies those records, keys and values unchanged, to a topic with the
count the store is partitioned into, where the same murmur2 hash puts each ordering id back on
its own partition. The store is not touched: what the workers stored stays where they read it.

Order: within one source partition the copies keep the records' order; records of one ordering
id on two partitions are interleaved by their timestamps, the only order Kafka gives across them.
Memory: records are read as the merge needs them, and a partition whose buffer is full is paused,
so a backlog of any size is moved with bounded memory.

Once every copy is acknowledged, the group's offsets on the old topic are committed where the
copy ended, so running the command again moves only what arrived since. Copying a record twice is
harmless: a task's key overwrites itself, and a task that finished never runs again.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Iterable, Iterator
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
_BUFFERED_RECORDS = 100_000
"""Records of the old topic held at most, waiting for their turn in the merge (about 50 MB for
records of 300 bytes); shared between its partitions."""
_MIN_PARTITION_RECORDS = 1_000
"""A partition's smallest share: below it, pausing and fetching again cost more than it saves."""
_CONSUMER_SETTINGS = {
    # Fetch in pieces of ~800 small records per partition, so one fetch rarely fills a buffer...
    "max.partition.fetch.bytes": 256 * 1024,
    # ...cap librdkafka's prefetch of all partitions at 8 MiB (64 MiB by default)...
    "queued.max.messages.kbytes": 8 * 1024,
    # ...and fetch again as soon as the merge drained it, not a second later (the default).
    "fetch.queue.backoff.ms": 10,
    # No `stats_cb` reads statistics here (a worker's consumer has one, see kafka_brokers.py).
    "statistics.interval.ms": 0,
}
_POLL_EVERY = 1000
_STALL_S = 60.0
"""How long the move waits for progress in reading, or for acknowledgements, before it fails."""


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
    peak_buffered: int = 0
    """The most records of the old topic held in memory at once."""

    @property
    def total(self) -> int:
        return sum(self.moved.values())


def move_unread(
    source: KafkaTaskLog,
    target: KafkaTaskLog,
    group_id: str,
    partitions: int,
    *,
    partition_records: int | None = None,
) -> MoveReport:
    """Copy what `group_id` has not committed on `source` to `target` (created with
    `partitions` if missing), then commit the group's offsets on `source` past the copies.

    `partition_records` is the most records buffered per partition of `source` (twice that for
    one batch); by default each partition's share of `_BUFFERED_RECORDS`.
    """
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
    consumer = Consumer(
        {**source.consumer_settings(group_id, client_id=CLIENT_ID), **_CONSUMER_SETTINGS}
    )
    try:
        starts = source.first_offsets([lag.partition for lag in lags])
        for lag in lags:
            first = starts[lag.partition]
            if lag.committed is not None and lag.committed < first:
                report.deleted[lag.partition] = first - lag.committed
            first = max(first, lag.committed or 0)
            if first < lag.end:
                report.ranges[lag.partition] = (first, lag.end)
        if partition_records is None:
            share = _BUFFERED_RECORDS // max(1, len(report.ranges))
            partition_records = max(_MIN_PARTITION_RECORDS, share)
        reader = _Reader(consumer, source.topic, report.ranges, partition_records)
        # Each partition's records in their order; across partitions, by timestamp.
        merged = heapq.merge(
            *(reader.records(partition) for partition in report.ranges),
            key=lambda message: message.timestamp()[1],
        )
        _copy(merged, target)
        report.moved, report.peak_buffered = reader.taken, reader.peak
        _commit(consumer, source.topic, report)
    finally:
        consumer.close()
    return report


class _Reader:
    """The records of `ranges`, read as they are asked for, one bounded buffer per partition."""

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        ranges: dict[int, tuple[int, int]],
        partition_records: int,
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._limit = partition_records
        self._buffers: dict[int, deque[Message]] = {partition: deque() for partition in ranges}
        self._ends = {partition: end for partition, (_, end) in ranges.items()}
        """The partitions not read to their end yet, and where their end is."""
        self._paused: set[int] = set()
        self._progress_at = time.monotonic()
        self.taken = dict.fromkeys(ranges, 0)
        """Records handed to the merge, by partition."""
        self.peak = 0
        """The most records buffered at once."""
        if ranges:
            consumer.assign([TopicPartition(topic, p, first) for p, (first, _) in ranges.items()])

    def records(self, partition: int) -> Iterator[Message]:
        """`partition`'s records, in offset order."""
        buffer = self._buffers[partition]
        while True:
            if buffer:
                self.taken[partition] += 1
                yield buffer.popleft()
            elif partition in self._ends:
                self._fill()
            else:
                return

    def _fill(self) -> None:
        """Read one batch into the buffers. Called when one of them is empty, so at least one
        partition is fetching and a batch that never comes means the brokers stalled."""
        self._pause_full_buffers()
        messages = self._consumer.consume(self._limit, 0.5)
        for message in messages:
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise BackendUnavailableError(f"reading topic {self._topic!r}: {error.str()}")
                continue  # librdkafka recovers from the rest by itself
            partition, offset = message.partition(), message.offset()
            if partition is None or offset is None:
                continue
            end = self._ends.get(partition)
            if end is not None and offset < end:
                self._buffers[partition].append(message)
        if messages:
            self._progress_at = time.monotonic()
        self.peak = max(self.peak, sum(len(buffer) for buffer in self._buffers.values()))
        positions = self._consumer.position([TopicPartition(self._topic, p) for p in self._ends])
        for position in positions:
            if position.offset >= self._ends[position.partition]:
                del self._ends[position.partition]
        if self._ends and time.monotonic() - self._progress_at > _STALL_S:
            where = ", ".join(f"partition {p} before offset {end}" for p, end in self._ends.items())
            raise BackendUnavailableError(
                f"reading topic {self._topic!r} stalled for {_STALL_S:g} s ({where}); "
                "nothing was marked moved: check the brokers and run the command again "
                "(records copied twice are harmless: a task's key overwrites itself)"
            )

    def _pause_full_buffers(self) -> None:
        """Pause a partition whose buffer is full; resume it once the merge took half."""
        for partition in self._ends:
            held = len(self._buffers[partition])
            if partition not in self._paused and held >= self._limit:
                self._paused.add(partition)
                self._consumer.pause([TopicPartition(self._topic, partition)])
            elif partition in self._paused and held <= self._limit // 2:
                self._paused.discard(partition)
                self._consumer.resume([TopicPartition(self._topic, partition)])


def _copy(messages: Iterable[Message], target: KafkaTaskLog) -> None:
    """Produce `messages` to `target` and wait until each is acknowledged."""
    producer = Producer(target.producer_settings())
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)

    sent = 0
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
    remaining = producer.flush(_STALL_S)
    if remaining or failures:
        why = failures[0].str() if failures else f"not acknowledged within {_STALL_S:g} s"
        raise BackendUnavailableError(
            f"{len(failures) + remaining} of {sent} records copied to topic {target.topic!r} "
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
