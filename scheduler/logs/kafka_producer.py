"""`LogProducer` on confluent-kafka: idempotent, acks=all, Java-compatible partitioning.

librdkafka reports deliveries only from inside `poll`/`flush`. While records are being sent, the
sending threads serve the ready reports themselves (`poll(0)` every few sends), since they hold the
GIL anyway; when sending stops, a daemon thread takes over and blocks in `poll`, so the last
futures resolve too. The thread stays out of the way while senders are busy: a thread taking the
GIL for every delivery report while another sends halved throughput when measured. Futures
resolve on whichever thread polled, so their done-callbacks must be quick.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from scheduler.errors import BackendUnavailableError
from scheduler.logs._delivery import DeliveryFuture
from scheduler.logs.abc import BatchFuture, LogProducer
from scheduler.logs.kafka_config import logger, unavailable

_POLL_INTERVAL_S = 0.05
_IDLE_AFTER_S = 0.005
"""How long without a `send` before the background thread starts serving delivery reports."""
_POLL_EVERY = 64
"""Senders serve delivery reports every this many sends (each `poll` is a GIL round trip)."""
_CLOSE_FLUSH_S = 30.0
_ANY_PARTITION = -1
"""librdkafka's RD_KAFKA_PARTITION_UA: the configured partitioner chooses."""


class KafkaLogProducer(LogProducer):
    """Sends records to one topic; safe to share between threads."""

    def __init__(self, *, config: dict[str, Any], topic: str) -> None:
        self._topic = topic
        self._bootstrap = str(config.get("bootstrap.servers", ""))
        self._producer = Producer(config)
        self._closed = threading.Event()
        self._open = True
        """False once closing starts: a plain flag, read on every send."""
        self._sends = 0
        # One future class per producer: a record's future finds its producer through its class,
        # one field less to fill for every record.
        self._future_type = type(
            "_RecordDelivery", (_RecordDelivery,), {"__slots__": (), "_sender": self}
        )
        self._close_lock = threading.Lock()
        self._poller = threading.Thread(
            target=self._poll_until_closed, name=f"kafka-producer-{topic}", daemon=True
        )
        self._poller.start()

    def send(
        self, key: bytes, value: bytes, *, on_durable: Callable[[], object] | None = None
    ) -> Future[int]:
        if not self._open:
            raise BackendUnavailableError(f"the producer for topic {self._topic!r} is closed")
        future = self._future_type(on_durable)
        self._produce(key, value, future.delivered)
        return future

    def send_many(self, records: Sequence[tuple[bytes, bytes]]) -> Future[int]:
        """One delivery callback shared by the batch: no future per record."""
        if not self._open:
            raise BackendUnavailableError(f"the producer for topic {self._topic!r} is closed")
        batch = BatchFuture(len(records))
        delivered, failure = batch.delivered, self.failure

        def on_delivery(error: KafkaError | None, message: Message) -> None:
            delivered(None if error is None else failure(error))

        for key, value in records:
            self._produce(key, value, on_delivery)
        return batch.future

    def _produce(self, key: bytes, value: bytes, on_delivery: Any) -> None:
        try:
            # Positional (topic, value, key, partition, on_delivery): keyword arguments cost a
            # dict per call. Partition -1 is librdkafka's "unassigned": the partitioner picks.
            self._producer.produce(self._topic, value, key, _ANY_PARTITION, on_delivery)
        except BufferError:
            self._produce_when_room(key, value, on_delivery)
        # Not atomic across sending threads, and need not be: it paces polls and tells the
        # background thread that somebody is sending.
        self._sends += 1
        if not self._sends % _POLL_EVERY:
            self._producer.poll(0)

    def _produce_when_room(self, key: bytes, value: bytes, on_delivery: Any) -> None:
        """The local queue is full: serve deliveries until there is room, never drop."""
        while True:
            self._producer.poll(_POLL_INTERVAL_S)
            try:
                self._producer.produce(self._topic, value, key, _ANY_PARTITION, on_delivery)
                return
            except BufferError:
                continue

    def flush(self, timeout: float) -> int:
        return int(self._producer.flush(timeout))

    def close(self) -> None:
        with self._close_lock:
            if self._closed.is_set():
                return
            self._open = False
            remaining = self._producer.flush(_CLOSE_FLUSH_S)
            if remaining:
                # Fail the futures of what could not be delivered instead of leaving them
                # pending forever: purged records get delivery reports with _PURGE_QUEUE.
                logger.error(
                    "closing the producer for topic %r with %d records not acknowledged; "
                    "their futures fail",
                    self._topic,
                    remaining,
                )
                self._producer.purge()
                self._producer.flush(0)
            self._closed.set()
        self._poller.join()

    def failure(self, error: KafkaError) -> BackendUnavailableError:
        return unavailable(
            f"making a record durable on topic {self._topic!r}", error, self._bootstrap
        )

    def _poll_until_closed(self) -> None:
        sends_seen = -1
        while not self._closed.is_set():
            if self._sends == sends_seen:  # nobody sent for a while: serve the reports here
                self._producer.poll(_POLL_INTERVAL_S)
            else:
                sends_seen = self._sends
                time.sleep(_IDLE_AFTER_S)


class _RecordDelivery(DeliveryFuture):
    """One record's future; its `delivered` method is the record's delivery report callback."""

    __slots__ = ()
    _sender: KafkaLogProducer
    """Set on each producer's subclass."""

    def delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self._resolve(message.partition() or 0)
        else:
            self.set_exception(self._sender.failure(error))
