"""The events a pending job collects, and whether they satisfy a trigger.

A trigger is satisfied over all the events of one job, and monotonically: adding an event never
unsatisfies it. TIME needs one fire of its cron expression, PARTITION its dataset's counts to add
up to `numPartitions`, PROGRAM_STATUS one run of its program that ended in one of its statuses,
AND every part, OR any part.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from scheduler.schedules.cron import Cron
from scheduler.schedules.model import (
    And,
    Leaf,
    Or,
    Partition,
    RunStatus,
    Schedule,
    Time,
    Trigger,
    leaves,
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TimeFired(_Frozen):
    """A TIME trigger's cron expression fired."""

    kind: Literal["TIME"] = "TIME"
    cron: str
    time_zone: str
    logical_time_ms: int
    """The fire time the cron expression names: the run's logical start time."""

    @property
    def identity(self) -> tuple[object, ...] | None:
        """What makes two deliveries of this event one event."""
        return (self.kind, self.cron, self.time_zone, self.logical_time_ms)


class PartitionsAdded(_Frozen):
    """Partitions of a dataset landed."""

    kind: Literal["PARTITION"] = "PARTITION"
    dataset: str
    count: int = Field(ge=1)
    event_id: str | None = None
    """The event's identity where its source has one (its log position); without one, two
    events of the same count cannot be told from one delivered twice."""

    @property
    def identity(self) -> tuple[object, ...] | None:
        """What makes two deliveries of this event one event (None: unknown)."""
        return None if self.event_id is None else (self.kind, self.dataset, self.event_id)


class RunEnded(_Frozen):
    """A run of a program reached a final status."""

    kind: Literal["PROGRAM_STATUS"] = "PROGRAM_STATUS"
    program: str
    run_id: str
    status: RunStatus
    properties: dict[str, str] = Field(default_factory=dict)
    """The ended run's arguments, which a triggered run may take over through the mapping."""

    @property
    def identity(self) -> tuple[object, ...] | None:
        """What makes two deliveries of this event one event."""
        return (self.kind, self.program, self.run_id, self.status)


Event = Annotated[TimeFired | PartitionsAdded | RunEnded, Field(discriminator="kind")]


def time_fired(cron: Cron, logical_time_ms: int) -> TimeFired:
    """The event of `cron` (from `Schedule.crons()`) firing at `logical_time_ms`."""
    return TimeFired(
        cron=cron.expression, time_zone=cron.time_zone, logical_time_ms=logical_time_ms
    )


def matches(leaf: Leaf, event: Event, default_zone: str) -> bool:
    """Whether the non-composite trigger `leaf` counts `event`."""
    if isinstance(leaf, Time):
        return (
            isinstance(event, TimeFired)
            and event.cron == leaf.cron
            and event.time_zone == (leaf.time_zone or default_zone)
        )
    if isinstance(leaf, Partition):
        return isinstance(event, PartitionsAdded) and event.dataset == leaf.dataset
    return (
        isinstance(event, RunEnded)
        and event.program == leaf.program
        and event.status in leaf.statuses
    )


def is_satisfied(trigger: Trigger, events: tuple[Event, ...], default_zone: str) -> bool:
    """Whether `events` satisfy `trigger`. Monotone: more events never unsatisfy it."""
    if isinstance(trigger, And):
        return all(is_satisfied(inner, events, default_zone) for inner in trigger.triggers)
    if isinstance(trigger, Or):
        return any(is_satisfied(inner, events, default_zone) for inner in trigger.triggers)
    if isinstance(trigger, Partition):
        landed = sum(event.count for event in counted(trigger, events, default_zone))
        return landed >= trigger.num_partitions
    return any(matches(trigger, event, default_zone) for event in events)


def concerns(schedule: Schedule, event: Event) -> bool:
    """Whether some trigger of `schedule` counts `event`."""
    return any(matches(leaf, event, schedule.time_zone) for leaf in leaves(schedule.trigger))


def counted(leaf: Partition, events: tuple[Event, ...], zone: str) -> list[PartitionsAdded]:
    """The events among `events` whose partitions `leaf` counts."""
    return [e for e in events if isinstance(e, PartitionsAdded) and matches(leaf, e, zone)]
