"""What the partition actors and the engine's plain objects pass to each other.

In `engine`, which imports nothing of `actors`, so the two form no cycle. Messages are
immutable; events are named in the past tense. Those made per task are NamedTuples (a frozen
dataclass's `__init__` cost more than the rest of a report).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from scheduler.model import Task, TaskKey


class ScheduledTask(NamedTuple):
    """A task on its way through a partition's actors, with what is known of its past."""

    task: Task
    """The task as last written."""
    attempts: int = 0
    """Attempts already started (from the status row after a reload)."""
    next_attempt_ms: int | None = None
    """A retry's earliest start; None for a first attempt."""
    checked: int = 0
    """The partition's status version (`UnflushedStatuses.version`) taken just before its status
    was read: a key that finished at a later version must not run again."""
    running_since_ms: int | None = None
    """Set when that status row said RUNNING: unless running here, that attempt is closed as
    interrupted before the task runs again."""

    @property
    def key(self) -> TaskKey:
        return self.task.key


class AttemptStarted(NamedTuple):
    """A pool thread began an executor call (it may have waited in the pool's queue)."""

    key: TaskKey
    attempt: int
    """Which attempt (1-based)."""
    started_ms: int


class AttemptFinished(NamedTuple):
    """An executor call returned or raised."""

    key: TaskKey
    attempt: int
    error: str | None
    """None on success; the error text otherwise."""
    cancelled: str | None
    """Why the attempt was cancelled, if it was."""
    permanent: bool = False
    """The failure cannot go away by retrying (the task names an unknown job, bad data)."""
    started_ms: int | None = None
    """When the executor call began (None: it never began, cancelled while queued)."""
    ended_ms: int = 0
    exit_code: int | None = None
    log_path: str | None = None
    data: Mapping[str, Any] | None = None
    """The data the attempt ran with, kept in a final status."""
    timed_out: bool = False
    """It failed by running past a timeout (the engine's or the executor's own)."""


@dataclass(frozen=True, slots=True)
class PartitionCounts:
    """What one partition holds in memory, for the ThroughputController and idleness checks."""

    scheduled: int
    """Tasks the PartitionScheduler holds (not yet due)."""
    due_held: int
    """Of those, tasks already due."""
    executing: int
    """Tasks the PartitionExecutor holds: queued per ordering id, running, or waiting to retry."""
    running: int
    unflushed: int
    """Status writes waiting for the next flush."""
