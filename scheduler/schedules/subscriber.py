"""The events handler of the schedules layer: an event on the events topic becomes one task
per schedule it concerns, in that schedule's queue, keyed by the event's position.

The reverse index (`ScheduleStore.names_for_key`) names the schedules: `dataset:<name>` those
with a PARTITION trigger on the dataset, `program:<name>` those with a PROGRAM_STATUS trigger
on the program, and `run-end:<program>` those with a job waiting for a run of their program to
end (a concurrency or last-run constraint). Whether a schedule is enabled is its own task's
business: the handler reads no schedule record, so 100,000 schedules cost index rows only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from scheduler.model import Task
from scheduler.programs.events import DataAvailableEvent, ProgramStatusEvent
from scheduler.programs.subscriber import EventHandler, ReceivedEvent
from scheduler.schedules.abc import ScheduleStore
from scheduler.schedules.events import Event, PartitionsAdded, RunEnded
from scheduler.schedules.executor import RUN_END_KEY
from scheduler.schedules.model import RunStatus
from scheduler.schedules.tasks import SCHEDULES_EXECUTOR, queue


def schedule_event(received: ReceivedEvent) -> Event | None:
    """The schedules' view of an event (docs/programs-and-runs.md, "Events")."""
    event = received.event
    if isinstance(event, DataAvailableEvent):
        return PartitionsAdded(
            dataset=event.dataset,
            count=len(event.partitions),
            event_id=event.event_id or received.position,
        )
    if isinstance(event, ProgramStatusEvent) and str(event.status) in RunStatus.__members__:
        return RunEnded(
            program=event.program,
            run_id=event.run_id,
            status=RunStatus(str(event.status)),
            properties={
                k: v if isinstance(v, str) else json.dumps(v) for k, v in event.properties.items()
            },
        )
    return None


def event_handler(store: ScheduleStore) -> EventHandler:
    """The handler to register with the `EventSubscriber`."""

    def handle(received: ReceivedEvent) -> Iterable[Task]:
        event = schedule_event(received)
        if event is None:
            return []
        triggered = set(store.names_for_key(received.event.key))
        waiting: set[str] = set()
        if isinstance(event, RunEnded):
            waiting = set(store.names_for_key(RUN_END_KEY + event.program))
        body = event.model_dump(mode="json")
        return [
            received.task(
                queue(name),
                {
                    "executor": SCHEDULES_EXECUTOR,
                    "op": "event",
                    "event": body if name in triggered else None,
                    "run_ended": name in waiting,
                },
            )
            for name in sorted(triggered | waiting)
        ]

    return handle
