"""The task log port: a partitioned, keyed, durable log with consumer-group assignment.

The contract is Kafka's, reduced to what the scheduler needs, so that the Kafka adapter is a thin
wrapper and the embedded adapter is a faithful miniature:

* A topic has a fixed number of partitions. A record's partition is
  `murmur2(key) % partition_count` exactly as Kafka's Java default partitioner computes it
  (`scheduler.partitioning.partition_for`), so any Kafka client can produce and a task lands on
  the same partition number in every adapter.
* Records of one partition have consecutive offsets starting at the log start; a consumer reads
  each partition in offset order.
* Consumers that share a group id split the partitions between them. Assignment changes are
  reported to a `RebalanceListener` *on the thread that calls `poll`, from inside `poll`*,
  incrementally as in Kafka's cooperative protocol: `on_revoked` lists only the partitions that
  leave this consumer and `on_assigned` only those that arrive. Partitions that stay are never
  revoked and re-assigned.
* Committed offsets are per (group, partition) and name the *next* offset to read. A newly
  assigned partition resumes at its committed offset, or at the log start if none.
"""

from __future__ import annotations

import itertools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

RecordKey = bytes | str
"""A key to send: bytes, or a `str` that the log writes as its UTF-8 bytes (as confluent-kafka
does, in C: `schedule_task` saves a Python `encode` per task). Records read back have bytes keys."""


def key_bytes(key: RecordKey) -> bytes:
    """The bytes a `RecordKey` is written as."""
    return key.encode() if isinstance(key, str) else key


Sender = Callable[[RecordKey, bytes], "Future[int]"]
"""What `LogProducer.sender` returns: `send` for one kind of record."""


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record read from the log."""

    partition: int
    """The partition it was read from."""
    offset: int
    """Its offset within that partition."""
    key: bytes | None
    """The record key (the ordering id, UTF-8), or None if a foreign producer sent none."""
    value: bytes | None
    """The record value (see `scheduler.codec`), or None for a tombstone."""
    timestamp_ms: int
    """The time the producer (or the broker) stamped on it."""


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """How far a consumer group is behind on one partition."""

    partition: int
    """The partition."""
    committed: int | None
    """The group's committed offset, or None if it never committed."""
    end: int
    """The offset the next produced record will get."""
    owner: str | None
    """The consumer (member id or client id) that owns it now, if known."""
    metadata: str = ""
    """The metadata committed with the offset (the worker's reload mark; see
    `engine.reload_mark`), "" if none."""

    @property
    def lag(self) -> int:
        return self.end - (self.committed or 0)


class RebalanceListener(Protocol):
    """Told about assignment changes, on the polling thread, from inside `LogConsumer.poll`."""

    def on_assigned(self, partitions: list[int]) -> None:
        """These partitions now belong to this consumer (incremental)."""

    def on_revoked(self, partitions: list[int]) -> None:
        """These partitions are leaving this consumer; it may still commit their offsets now."""

    def on_lost(self, partitions: list[int]) -> None:
        """These partitions were taken away without a chance to commit (session timeout)."""


class LogProducer(ABC):
    """Appends records to the log. Thread-safe: many threads may send at once."""

    @abstractmethod
    def send(
        self, key: RecordKey, value: bytes, *, on_durable: Callable[[], object] | None = None
    ) -> Future[int]:
        """Append a record to the partition of `key` (a `str` key is written as its UTF-8).

        The future resolves to the record's partition once the record is durable (Kafka:
        acknowledged by all in-sync replicas), and fails with `BackendUnavailableError` if it
        could not be made durable. `on_durable` runs first, on the thread that learnt of it (a
        metric's increment, cheaper than a done-callback). `send` may block briefly while the
        producer's buffer is full (backpressure) but never drops a record silently.
        """

    def sender(self, on_durable: Callable[[], object] | None = None) -> Sender:
        """`send` with `on_durable` fixed, for a caller that sends every record the same way
        (`schedule_task`). Adapters may return a function specialised for it; this default
        binds `send`."""
        return partial(self.send, on_durable=on_durable)

    def send_many(self, records: Sequence[tuple[RecordKey, bytes]]) -> Future[int]:
        """Append many (key, value) records; one future resolves, to their count, once every one
        of them is durable, or fails with the first error.

        For bulk producers (backfills): it saves a future per record. Records of one key keep
        their order. This default sends them one by one; adapters may do better.
        """
        batch = BatchFuture(len(records))
        for key, value in records:
            self.send(key, value).add_done_callback(lambda done: batch.delivered(done.exception()))
        return batch.future

    @abstractmethod
    def flush(self, timeout: float) -> int:
        """Wait until every record sent so far is acknowledged; return how many are still not."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release resources."""


class LogConsumer(ABC):
    """Reads the log as one member of a consumer group. Not thread-safe: one polling thread."""

    @abstractmethod
    def subscribe(self, listener: RebalanceListener) -> None:
        """Join the group; assignments arrive through `listener` during later `poll` calls."""

    def session_timing(self) -> tuple[float, float] | None:
        """(session timeout, heartbeat interval) in seconds of the group this consumer joins:
        past the timeout without a heartbeat, the group gives its partitions to another
        member. None (this default) for a log whose partitions never move away from a live but
        silent process."""
        return None

    @abstractmethod
    def poll(self, max_records: int, timeout: float) -> list[LogRecord]:
        """Return up to `max_records` records of assigned, unpaused partitions.

        Waits up to `timeout` seconds for at least one record; returns an empty list on timeout.
        Rebalance callbacks run inside this call, before any record of a newly assigned partition
        is returned and after which no record of a revoked partition is returned.
        """

    @abstractmethod
    def commit(
        self,
        offsets: Mapping[int, int],
        *,
        wait: bool = True,
        metadata: Mapping[int, str] | None = None,
    ) -> None:
        """Commit, per partition, the next offset to read, with the partition's `metadata`
        string if given (Kafka's commit metadata; a commit without it stores none).

        With `wait` (the default) it returns once the commit is durable, or raises. Without, it
        only starts the commit (Kafka: an asynchronous commit whose failure is logged): for the
        routine commit after each batch, where a lost commit only means records read again.
        """

    def committed(self, partitions: Collection[int]) -> dict[int, int | None]:
        """The group's committed offsets for these partitions (None where nothing is committed)."""
        return {p: offset for p, (offset, _) in self.committed_with_metadata(partitions).items()}

    @abstractmethod
    def committed_with_metadata(
        self, partitions: Collection[int]
    ) -> dict[int, tuple[int | None, str]]:
        """The group's committed offsets and their metadata ("" where none was committed)."""

    @abstractmethod
    def seek(self, partition: int, offset: int) -> None:
        """Make the next `poll` read `partition` from `offset` (used to re-read after a failure)."""

    @abstractmethod
    def pause(self, partitions: Collection[int]) -> None:
        """Stop returning records of these partitions without leaving the group (backpressure)."""

    @abstractmethod
    def resume(self, partitions: Collection[int]) -> None:
        """Undo `pause`."""

    @abstractmethod
    def assignment(self) -> set[int]:
        """The partitions this consumer owns now."""

    def has_joined(self) -> bool:
        """Whether the group has given this consumer its share since `subscribe`, possibly no
        partition at all (more consumers than partitions). Any thread."""
        return bool(self.assignment())

    def problem(self) -> str | None:
        """What keeps this consumer from reading while it runs on and keeps trying (Kafka: a
        login or an ACL the brokers refuse, no broker answering), in words that say what to
        check; None while nothing does. Any thread."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Leave the group: the listener's `on_revoked` runs for every owned partition."""


class TaskLog(ABC):
    """One topic of the task log, and the means to produce to it and consume from it."""

    topic: str
    """The topic name."""

    @property
    def location(self) -> str:
        """The topic and where it lives, for messages (`topic 'tasks' on Kafka at '...'`)."""
        return f"topic {self.topic!r}"

    @abstractmethod
    def ensure_topic(self, partitions: int) -> int:
        """Create the topic with `partitions` partitions if it does not exist.

        Returns the topic's actual partition count, which differs from `partitions` if the topic
        already existed with another count (the caller decides whether that is an error).
        """

    @abstractmethod
    def partition_count(self) -> int:
        """The topic's partition count; raises `TopicMissingError` if the topic does not exist."""

    def topic_id(self) -> str | None:
        """The ID of the topic as it is now: a topic deleted and created again under the same
        name has another one (Kafka's topic IDs; the embedded log's file identity). None if the
        log does not identify topics (an in-memory log; brokers before Kafka 2.8). Raises
        `TopicMissingError` if the topic does not exist."""
        return None

    @abstractmethod
    def producer(self) -> LogProducer:
        """A new producer for this topic."""

    @abstractmethod
    def consumer(self, group_id: str, *, client_id: str) -> LogConsumer:
        """A new consumer of this topic in group `group_id`."""

    @abstractmethod
    def describe_group(
        self, group_id: str, partitions: Collection[int] | None = None
    ) -> list[PartitionLag]:
        """Committed offset, end offset and owner of every partition (or of `partitions`), for
        the admin view and the lag metric."""

    @abstractmethod
    def first_offsets(self, partitions: Collection[int]) -> dict[int, int]:
        """The offset of the first record each partition still holds: retention deleted the
        ones before it (Kafka's log start offset)."""

    def serve(self) -> None:
        """Log what this log's shared clients have queued (Kafka: the admin client's librdkafka
        lines) now rather than at `close`; a long-running process calls it every few seconds."""
        return None  # a log without clients of its own (the embedded one) has nothing queued

    @abstractmethod
    def close(self) -> None:
        """Release shared resources (admin clients, files)."""


class BatchFuture:
    """Resolves one future once `expected` deliveries succeeded, or fails it on the first error.

    `delivered` may be called from any thread. A success is counted by `next` on an
    `itertools.count` (one C call, atomic under the GIL): a lock per record costs as much as the
    record."""

    def __init__(self, expected: int, future: Future[int] | None = None) -> None:
        self.future: Future[int] = Future() if future is None else future
        self.future.set_running_or_notify_cancel()
        self._expected = expected
        self._successes = itertools.count(1)
        self._finish_lock = threading.Lock()
        if expected == 0:
            self.future.set_result(0)

    def delivered(self, error: BaseException | None = None) -> None:
        if error is not None:
            self._finish(error)
        elif next(self._successes) == self._expected:
            self._finish(None)

    def set_result(self, _partition: int) -> None:
        """One record is durable: a batch stands in for each of its records' futures."""
        self.delivered()

    def set_exception(self, error: BaseException) -> None:
        self.delivered(error)

    def reporter(
        self,
        failure: Callable[[Any, Any], BaseException],
        kept: Callable[[Any, Any, Any], bool] | None = None,
    ) -> Callable[[Any, Any], None]:
        """A delivery callback for each record of the batch, `(error, report)`: None counts a
        success, anything else fails the batch with `failure(error, report)` (`delivered` in one
        Python call instead of two), unless `kept(error, report, callback)` says the record
        is sent again with the same callback."""
        successes, expected, finish = self._successes, self._expected, self._finish

        def report(error: Any, detail: Any) -> None:
            if error is None:
                if next(successes) == expected:
                    finish(None)
            elif kept is None or not kept(error, detail, report):
                finish(failure(error, detail))

        return report

    def _finish(self, error: BaseException | None) -> None:
        with self._finish_lock:  # the last success and a failure may race; the first one wins
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(self._expected)
