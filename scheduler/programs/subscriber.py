"""The events subscriber: each worker reads the events topic as a consumer group of its own and
hands every event to the registered handlers.

A handler turns an event into engine tasks (the schedules layer: one control task per schedule
the event concerns, in that schedule's queue). It should key them by the event's position
(`ReceivedEvent.task` keys a task by the record's time and its topic/partition/offset), so an
event read again after a crash makes the same keys, which the engine runs once. The subscriber
commits an event's offset only after every task the handlers returned for it is durable on the
tasks log: a restart neither drops an event nor counts one twice.

A failing handler or an unreachable log is a state, not a crash: the batch is read again from
its first offset after a pause, until it goes through.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from scheduler.client import SchedulerClient
from scheduler.errors import BackendUnavailableError, TaskDataError
from scheduler.logs.abc import LogConsumer, LogRecord, TaskLog
from scheduler.model import Task, TaskKey
from scheduler.programs.events import Event, decode_event

logger = logging.getLogger(__name__)

RETRY_PAUSE_S = 1.0
"""How long the subscriber waits before reading a failed batch again."""


@dataclass(frozen=True, slots=True)
class ReceivedEvent:
    """An event as a handler gets it: with where it was read."""

    event: Event
    """The event."""
    topic: str
    """The events topic."""
    partition: int
    """Its partition."""
    offset: int
    """Its offset: with the partition, what a handler keys its tasks by."""

    timestamp_ms: int
    """The record's timestamp: with the position, a task key that is the same on every read."""

    @property
    def position(self) -> str:
        """`topic/partition/offset`: the uniqueness key for a handler's tasks."""
        return f"{self.topic}/{self.partition}/{self.offset}"

    def task(self, ordering_id: str, data: Mapping[str, Any]) -> Task:
        """A task this event causes in queue `ordering_id`, keyed by the event (its record's
        time and position), so reading the event again makes the same key, which runs once."""
        return Task.from_key(TaskKey.from_ms(ordering_id, self.timestamp_ms, self.position), data)


EventHandler = Callable[[ReceivedEvent], Iterable[Task]]
"""Returns the engine tasks an event causes (none, often); raising makes the batch retry."""


class _NoRebalanceWork:
    def on_assigned(self, partitions: list[int]) -> None:
        pass

    def on_revoked(self, partitions: list[int]) -> None:
        pass

    def on_lost(self, partitions: list[int]) -> None:
        pass


class EventSubscriber:
    """Consumes the events topic in group `group_id` and feeds `handlers`."""

    def __init__(
        self,
        *,
        log: TaskLog,
        client: SchedulerClient,
        group_id: str,
        client_id: str = "events",
        handlers: Iterable[EventHandler] = (),
        max_records: int = 500,
        retry_pause_s: float = RETRY_PAUSE_S,
    ) -> None:
        self.log = log
        self.client = client
        self.group_id = group_id
        self.client_id = client_id
        self.max_records = max_records
        self.retry_pause_s = retry_pause_s
        self._handlers: list[EventHandler] = list(handlers)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: LogConsumer | None = None
        self.joined = threading.Event()
        """Set once the group gave this subscriber its share of the partitions."""

    def register(self, handler: EventHandler) -> None:
        """Hand every event read from now on to `handler` too (any thread)."""
        with self._lock:
            self._handlers.append(handler)

    def start(self) -> EventSubscriber:
        self._thread = threading.Thread(target=self._run, name="events-subscriber", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        consumer = self.log.consumer(self.group_id, client_id=self.client_id)
        try:
            consumer.subscribe(_NoRebalanceWork())
            while not self._stopping.is_set():
                try:
                    records = consumer.poll(self.max_records, 0.2)
                except BackendUnavailableError as error:  # a state: the log comes back
                    logger.warning("reading %s: %s", self.log.topic, error)
                    self._stopping.wait(self.retry_pause_s)
                    continue
                if consumer.has_joined():
                    self.joined.set()
                if records and not self.handle(consumer, records):
                    self._stopping.wait(self.retry_pause_s)
        except Exception:
            logger.exception("the events subscriber of group %r stopped", self.group_id)
            raise
        finally:
            consumer.close()

    def handle(self, consumer: LogConsumer, records: Sequence[LogRecord]) -> bool:
        """Run the handlers over `records`, make their tasks durable, then commit; on a failure
        rewind to the batch's first offsets and return False."""
        with self._lock:
            handlers = list(self._handlers)
        first: dict[int, int] = {}
        next_offsets: dict[int, int] = {}
        try:
            futures: list[Future[int]] = []
            for record in records:
                first.setdefault(record.partition, record.offset)
                next_offsets[record.partition] = record.offset + 1
                try:
                    event = decode_event(record.value)
                except TaskDataError as error:
                    logger.warning(
                        "skipping events record %s/%d at offset %d: %s",
                        self.log.topic,
                        record.partition,
                        record.offset,
                        error,
                    )
                    continue
                received = ReceivedEvent(
                    event, self.log.topic, record.partition, record.offset, record.timestamp_ms
                )
                for handler in handlers:
                    futures.extend(self.client.schedule_task(t) for t in handler(received))
            for future in futures:
                future.result()
            consumer.commit(next_offsets)
            return True
        except Exception:
            logger.exception(
                "events of %s could not be handled; reading them again in %gs",
                self.log.topic,
                self.retry_pause_s,
            )
            for partition, offset in first.items():
                consumer.seek(partition, offset)
            return False
