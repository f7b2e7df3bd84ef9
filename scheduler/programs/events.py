"""Events on the events topic (`<topic>-events`): program status and data availability.

Records are keyed by the event's key (`program:<name>` or `dataset:<name>`), so every event of one
program or dataset lands on one partition, in order, and a subscriber can look schedules up by
that key. Values are JSON objects with a `type`. Publishing is at-least-once: a run's terminal
status may be published again after a crash, with the same `event_id`, for consumers that
de-duplicate.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from scheduler.engine.clock import now_ms
from scheduler.errors import TaskDataError
from scheduler.logs.abc import LogProducer, TaskLog
from scheduler.programs.model import Run, RunStatus

EVENTS_SUFFIX = "-events"
"""The events topic is the tasks topic's name with this suffix."""


def events_topic(tasks_topic: str) -> str:
    return tasks_topic + EVENTS_SUFFIX


@dataclass(frozen=True, slots=True)
class ProgramStatusEvent:
    """A run reached a terminal status."""

    program: str
    """The program that ran."""
    run_id: str
    """The run."""
    status: RunStatus
    """COMPLETED, FAILED or KILLED."""
    properties: Mapping[str, Any] = field(default_factory=dict)
    """The run's arguments, for the runs it triggers."""
    time_ms: int = 0
    """When the run ended."""

    @property
    def key(self) -> str:
        return f"program:{self.program}"

    @property
    def event_id(self) -> str:
        return f"run:{self.run_id}:{self.status}"

    @classmethod
    def of(cls, run: Run) -> ProgramStatusEvent:
        return cls(run.program, run.run_id, run.status, dict(run.arguments), run.ended_ms or 0)


@dataclass(frozen=True, slots=True)
class DataAvailableEvent:
    """Partitions of a dataset landed."""

    dataset: str
    """The dataset's name."""
    partitions: tuple[str, ...]
    """The partitions that landed (`2026-01-01T05`, `region=eu/day=2026-01-01`, ...)."""
    time_ms: int = 0
    """When they were published."""
    event_id: str = ""
    """Unique per publication (a uuid4 unless given)."""

    @property
    def key(self) -> str:
        return f"dataset:{self.dataset}"


Event = ProgramStatusEvent | DataAvailableEvent


def encode_event(event: Event) -> bytes:
    if isinstance(event, ProgramStatusEvent):
        body: dict[str, Any] = {
            "type": "program-status",
            "program": event.program,
            "run_id": event.run_id,
            "status": str(event.status),
            "properties": dict(event.properties),
        }
    else:
        body = {
            "type": "data-available",
            "dataset": event.dataset,
            "partitions": list(event.partitions),
        }
    body["event_id"] = event.event_id
    body["time_ms"] = event.time_ms
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def decode_event(value: bytes | None) -> Event:
    """The event in a record's value; `TaskDataError` naming what is wrong otherwise."""
    try:
        body = json.loads(value or b"")
        kind = body["type"]
        if kind == "program-status":
            return ProgramStatusEvent(
                body["program"],
                body["run_id"],
                RunStatus(body["status"]),
                dict(body.get("properties") or {}),
                int(body.get("time_ms") or 0),
            )
        if kind == "data-available":
            return DataAvailableEvent(
                body["dataset"],
                tuple(str(p) for p in body["partitions"]),
                int(body.get("time_ms") or 0),
                str(body.get("event_id") or ""),
            )
        raise ValueError(f"unknown event type {kind!r}")
    except (ValueError, KeyError, TypeError) as error:
        raise TaskDataError(f"not an event record ({error}): {(value or b'')[:200]!r}") from None


class EventPublisher:
    """Publishes events on the events topic. Thread-safe; owns its producer."""

    def __init__(self, log: TaskLog) -> None:
        self.log = log
        self._producer: LogProducer = log.producer()

    def publish(self, event: Event) -> Future[int]:
        """Append `event`; the future resolves once it is durable."""
        return self._producer.send(event.key, encode_event(event))

    def publish_partitions(
        self, dataset: str, partitions: Iterable[str], *, event_id: str | None = None
    ) -> Future[int]:
        """Say that `partitions` of `dataset` landed (the data-availability API)."""
        landed = tuple(str(p) for p in partitions)
        if not dataset or not landed:
            raise TaskDataError(
                f"publish names dataset {dataset!r} and partitions {landed!r}; give a dataset "
                "and at least one partition"
            )
        return self.publish(
            DataAvailableEvent(dataset, landed, now_ms(), event_id or str(uuid.uuid4()))
        )

    def flush(self, timeout: float = 30.0) -> int:
        return self._producer.flush(timeout)

    def close(self) -> None:
        self._producer.close()


_RUNNING_UNDER: ContextVar[EventPublisher | None] = ContextVar("scheduler_events", default=None)
"""The publisher of the run whose program runs in this thread (set by the workflow route)."""


@contextmanager
def publishing_with(publisher: EventPublisher | None) -> Iterator[None]:
    """Make `publish_output` publish through `publisher` while a program runs."""
    token = _RUNNING_UNDER.set(publisher)
    try:
        yield
    finally:
        _RUNNING_UNDER.reset(token)


def publish_output(dataset: str, partitions: Iterable[str], *, timeout: float = 60.0) -> None:
    """Say, from inside a program (a PySpark job that wrote its output), that `partitions` of
    `dataset` landed; returns once the event is durable. Outside a run it refuses."""
    publisher = _RUNNING_UNDER.get()
    if publisher is None:
        raise RuntimeError(
            f"publish_output({dataset!r}, ...) called outside a run: only programs run by a "
            "worker's workflow route publish through their context; elsewhere use "
            "EventPublisher.publish_partitions or `scheduler events publish-partition`"
        )
    publisher.publish_partitions(dataset, partitions).result(timeout)
