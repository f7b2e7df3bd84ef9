"""`LogProducer` on confluent-kafka: idempotent, acks=all, Java-compatible partitioning.

librdkafka reports deliveries only from inside `poll`/`flush`. While records are being sent, the
sending threads serve the ready reports themselves (`poll(0)` every few sends), since they hold the
GIL anyway; when sending stops, a daemon thread takes over and blocks in `poll`, so the last
futures resolve too. The thread stays out of the way while senders are busy: a thread taking the
GIL for every delivery report while another sends halved throughput when measured. Futures
resolve on whichever thread polled, so their done-callbacks must be quick.
"""

from __future__ import annotations

import functools
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
"""How long after the last `send` the background thread starts serving delivery reports."""
_POLL_EVERY = 64
"""Senders serve delivery reports every this many sends (each `poll` is a GIL round trip)."""
_CLOSE_FLUSH_S = 30.0


class KafkaLogProducer(LogProducer):
    """Sends records to one topic; safe to share between threads."""

    def __init__(self, *, config: dict[str, Any], topic: str) -> None:
        self._topic = topic
        self._bootstrap = str(config.get("bootstrap.servers", ""))
        self._producer = Producer(config)
        self._closed = threading.Event()
        self._last_send = 0.0
        self._sends = 0
        self._close_lock = threading.Lock()
        self._poller = threading.Thread(
            target=self._poll_until_closed, name=f"kafka-producer-{topic}", daemon=True
        )
        self._poller.start()

    def send(
        self, key: bytes, value: bytes, *, on_durable: Callable[[], object] | None = None
    ) -> Future[int]:
        if self._closed.is_set():
            raise BackendUnavailableError(f"the producer for topic {self._topic!r} is closed")
        future = _RecordDelivery(self, on_durable)
        self._produce(key, value, future)
        self._last_send = time.monotonic()
        return future

    def send_many(self, records: Sequence[tuple[bytes, bytes]]) -> Future[int]:
        """One delivery callback shared by the batch: no future per record."""
        if self._closed.is_set():
            raise BackendUnavailableError(f"the producer for topic {self._topic!r} is closed")
        batch = BatchFuture(len(records))
        on_delivery = functools.partial(self._delivered_in_batch, batch)
        for key, value in records:
            self._produce(key, value, on_delivery)
        self._last_send = time.monotonic()
        return batch.future

    def _produce(self, key: bytes, value: bytes, on_delivery: Any) -> None:
        while True:
            try:
                self._producer.produce(self._topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                # The local queue is full: serve deliveries until there is room, never drop.
                self._producer.poll(_POLL_INTERVAL_S)
        self._sends += 1
        if not self._sends % _POLL_EVERY:
            self._producer.poll(0)

    def flush(self, timeout: float) -> int:
        return int(self._producer.flush(timeout))

    def close(self) -> None:
        with self._close_lock:
            if self._closed.is_set():
                return
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

    def _delivered_in_batch(
        self, batch: BatchFuture, error: KafkaError | None, message: Message
    ) -> None:
        batch.delivered(None if error is None else self.failure(error))

    def _poll_until_closed(self) -> None:
        while not self._closed.is_set():
            if time.monotonic() - self._last_send > _IDLE_AFTER_S:
                self._producer.poll(_POLL_INTERVAL_S)
            else:
                time.sleep(_IDLE_AFTER_S)


class _RecordDelivery(DeliveryFuture):
    """One record's future, and its own delivery callback: no callback object per record."""

    __slots__ = ("_sender",)

    def __init__(self, producer: KafkaLogProducer, on_success: Callable[[], object] | None) -> None:
        DeliveryFuture.__init__(self, on_success)
        self._sender = producer

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.set_result(message.partition() or 0)
        else:
            self.set_exception(self._sender.failure(error))
