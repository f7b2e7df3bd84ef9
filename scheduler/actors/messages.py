"""What the partition actors pass to each other.

Messages are immutable; events are named in the past tense. Proxies carry them as method
arguments (pykka's typed-proxy style), so this module holds the payloads, not envelopes.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.model import ScheduleCursor, Task, TaskKey


@dataclass(frozen=True, slots=True)
class ScheduledTask:
    """A task on its way through a partition's actors, with what is known of its past."""

    task: Task
    """The task as last written."""
    attempts: int = 0
    """Attempts already started (from the status row after a reload)."""
    next_attempt_ms: int | None = None
    """A retry's earliest start; None for a first attempt."""
    checked_ms: int = 0
    """When its status row was read (it was not final then): a key that finished after that
    must not run again."""

    @property
    def key(self) -> TaskKey:
        return self.task.key


@dataclass(frozen=True, slots=True)
class AttemptStarted:
    """A pool thread began an executor call (it may have waited in the pool's queue)."""

    key: TaskKey
    """The task."""
    attempt: int
    """Which attempt (1-based)."""
    started_ms: int
    """When the call began."""


@dataclass(frozen=True, slots=True)
class AttemptFinished:
    """An executor call returned or raised."""

    key: TaskKey
    """The task."""
    attempt: int
    """Which attempt (1-based)."""
    error: str | None
    """None on success; the error text otherwise."""
    cancelled: str | None
    """Why the attempt was cancelled, if it was."""
    permanent: bool = False
    """The failure cannot go away by retrying (the task names an unknown job, bad data)."""


@dataclass(frozen=True, slots=True)
class TasksLoaded:
    """TaskPersistence read a slice of the schedule rows."""

    count: int
    """Rows handed to the PartitionScheduler."""
    exhausted: bool
    """True when every row up to the requested bound is now loaded."""
    checkpoint: ScheduleCursor
    """The read checkpoint after this load."""


@dataclass(frozen=True, slots=True)
class PartitionCounts:
    """What one partition holds in memory, for the ThroughputController and idleness checks."""

    scheduled: int
    """Tasks the PartitionScheduler holds (not yet due)."""
    due_held: int
    """Of those, tasks already due (should be ~0 except in the instant before dispatch)."""
    executing: int
    """Tasks the PartitionExecutor holds: queued per ordering id, running, or waiting to retry."""
    running: int
    """Attempts running now."""
    unflushed: int
    """Status writes waiting for the next flush."""
