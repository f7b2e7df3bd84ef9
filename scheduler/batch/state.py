"""The partitions of one job as a compact, pure state: what ran and how it ended.

Only partitions that did something are recorded, and finished ones as index ranges on the job's
grid (`Intervals`): a year of hourly successes is one range. A partition that is in no record is
waiting (for its time, its dependencies or a slot); `scheduler.batch.decide` tells which. Running
and failed partitions are few (bounded by the parallelism and by failures) and keyed by instant,
so a run outlives a reload that moves the grid under it.

Every function returns a new state; nothing reads a clock. The engine applies them in the job's
ordering queue (``job:<name>``), one writer per job.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypeVar

from scheduler.batch.config import FailurePolicy, Job, OnFailure
from scheduler.batch.durations import add, format_partition
from scheduler.batch.errors import PartitionStateError
from scheduler.batch.intervals import Intervals
from scheduler.batch.partitions import Grid


class Status(enum.StrEnum):
    """Where a partition stands, as `scheduler jobs partitions` shows it."""

    WAITING_TIME = "WAITING_TIME"
    """Its P + increment has not passed yet."""
    WAITING_DEPENDENCIES = "WAITING_DEPENDENCIES"
    """Due, but some dependency partitions have not succeeded yet (`waiting_for` names them)."""
    BLOCKED_FOREVER = "BLOCKED_FOREVER"
    """A dependency can never be met: it is before its job's start, at or after its end, off
    its grid, failed for good or removed by retention (`reason` says which). A rerun of the
    upstream partition (or a new configuration) is what unblocks it."""
    RUNNABLE = "RUNNABLE"
    """Due, dependencies met: starts when a slot is free."""
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    MARKED_SUCCESS = "MARKED_SUCCESS"
    """Its run failed and the job's policy was mark_success: dependants go on."""
    FAILED = "FAILED"
    """Its last run failed; `retry_at` says when it runs again, None when it does not."""
    SKIPPED = "SKIPPED"
    """Older than the job's catch_up when it would have started: never runs (until a rerun)."""
    REMOVED = "REMOVED"
    """It failed for good and retention deleted its record."""


@dataclass(frozen=True, slots=True)
class Running:
    """A partition's run in progress."""

    attempt: int
    """1 for the first run of the partition, 2 for the first retry..."""
    started_ms: int
    policy: FailurePolicy
    """The job's failure policy when the run started: the one its end follows."""


@dataclass(frozen=True, slots=True)
class Failed:
    """A partition whose last run failed."""

    attempts: int
    ended_ms: int
    retry_at: int | None
    """When it may run again; None: not before a rerun (the attempt limit was reached)."""
    reason: str


class Outcome(enum.StrEnum):
    """What the end of a run made of its partition."""

    SUCCEEDED = "SUCCEEDED"
    MARKED_SUCCESS = "MARKED_SUCCESS"
    RETRY = "RETRY"
    GAVE_UP = "GAVE_UP"


_V = TypeVar("_V")


def _frozen(mapping: Mapping[int, _V]) -> Mapping[int, _V]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class JobState:
    """What happened to the partitions of one job; indexes are on `grid`."""

    job: str
    grid: Grid
    done: Intervals = field(default_factory=Intervals)
    """Partitions that succeeded or were marked success: what dependants wait for."""
    marked: Intervals = field(default_factory=Intervals)
    """The subset of `done` that was marked success after a failed run."""
    removed: Intervals = field(default_factory=Intervals)
    """Failed-for-good partitions whose records retention deleted."""
    running: Mapping[int, Running] = field(default_factory=lambda: MappingProxyType({}))
    """By partition instant (epoch ms)."""
    failed: Mapping[int, Failed] = field(default_factory=lambda: MappingProxyType({}))
    """By partition instant (epoch ms)."""

    def status_of_record(self, n: int) -> Status | None:
        """The status the records give partition n, None when none does (it is waiting)."""
        ms = self.grid.at(n)
        if ms in self.running:
            return Status.RUNNING
        if n in self.marked:
            return Status.MARKED_SUCCESS
        if n in self.done:
            return Status.SUCCEEDED
        if ms in self.failed:
            return Status.FAILED
        if n in self.removed:
            return Status.REMOVED
        return None


def new_state(job: Job) -> JobState:
    """The state of a job none of whose partitions ran."""
    return JobState(job.name, Grid.of(job))


def start(state: JobState, job: Job, partition_ms: int, now: int) -> JobState:
    """The partition at `partition_ms` started running at `now` under the job's current policy."""
    n = state.grid.index_of(partition_ms)
    if partition_ms in state.running or n is None or n in state.done:
        raise PartitionStateError(
            f"{job.name} {format_partition(partition_ms)} cannot start: it is "
            f"{'running' if partition_ms in state.running else 'done or not a partition'}"
        )
    previous = state.failed.get(partition_ms)
    attempt = previous.attempts + 1 if previous else 1
    running = {**state.running, partition_ms: Running(attempt, now, job.failure)}
    failed = {k: v for k, v in state.failed.items() if k != partition_ms}
    return replace(state, running=_frozen(running), failed=_frozen(failed))


def finish(
    state: JobState, partition_ms: int, succeeded: bool, now: int, reason: str = ""
) -> tuple[JobState, Outcome]:
    """The run of the partition at `partition_ms` ended at `now`; a run that could not start is
    a failure whose `reason` says why. The policy captured at its start decides what follows."""
    run = state.running.get(partition_ms)
    if run is None:
        raise PartitionStateError(
            f"{state.job} {format_partition(partition_ms)} has no run in progress to finish"
        )
    running = _frozen({k: v for k, v in state.running.items() if k != partition_ms})
    n = state.grid.index_of(partition_ms)
    if n is None:  # the grid moved under the run (a reload): only its history keeps it
        state = replace(state, running=running)
        running = state.running
    if succeeded:
        outcome = Outcome.SUCCEEDED
    elif run.policy.on_failure is OnFailure.MARK_SUCCESS:
        outcome = Outcome.MARKED_SUCCESS
    else:
        retry_at = run.policy.retry_at(now, run.attempt)
        outcome = Outcome.GAVE_UP if retry_at is None else Outcome.RETRY
        if n is None:
            return state, outcome
        failure = Failed(run.attempt, now, retry_at, reason or "the run failed")
        failed = _frozen({**state.failed, partition_ms: failure})
        return replace(state, running=running, failed=failed), outcome
    if n is None:
        return state, outcome
    marked = state.marked.with_(n) if outcome is Outcome.MARKED_SUCCESS else state.marked
    done = state.done.with_(n)
    return replace(state, running=running, done=done, marked=marked), outcome


def retention_cutoff(job: Job, state: JobState, now: int) -> int | None:
    """Epoch ms before which finished records of the job are deleted: the newest due partition
    minus the job's retention (None while no partition is due)."""
    due = state.grid.due(now)
    if due == 0:
        return None
    return state.grid.shifted(due - 1, job.retention.negated())


def apply_retention(job: Job, state: JobState, now: int) -> tuple[JobState, int | None]:
    """The state after retention at `now`, and the cutoff: the engine deletes the history of
    finished runs of partitions before it. Waiting, running and retrying partitions are never
    touched, whatever their age (how far back partitions still start is `catch_up`'s business).
    A partition's success outlives its history: dependants still see it done. A partition that
    failed for good becomes REMOVED."""
    cutoff = retention_cutoff(job, state, now)
    if cutoff is None:
        return state, None
    grid = state.grid
    gone = [ms for ms, f in state.failed.items() if f.retry_at is None and ms < cutoff]
    removed = state.removed
    for ms in gone:
        n = grid.index_of(ms)
        if n is not None and 0 <= n < grid.count:
            removed = removed.with_(n)
    failed = _frozen({k: v for k, v in state.failed.items() if k not in gone})
    # Records outside the job's partitions (kept when its start moved later) serve no dependant.
    first_kept = min(0, grid.ceil(cutoff))
    done = state.done.without_range(_lowest(state.done, first_kept), first_kept)
    marked = state.marked.without_range(_lowest(state.marked, first_kept), first_kept)
    return replace(state, failed=failed, removed=removed, done=done, marked=marked), cutoff


def _lowest(intervals: Intervals, default: int) -> int:
    ranges = intervals.ranges
    return min(ranges[0][0], default) if ranges else default


def rerun(state: JobState, first_ms: int, stop_ms: int) -> JobState:
    """The partitions in [first_ms, stop_ms) forget how they ended and wait to run again
    (successes and marked successes included); running ones are left running."""
    grid = state.grid
    lo, hi = grid.ceil(first_ms), grid.ceil(stop_ms)
    failed = {k: v for k, v in state.failed.items() if not first_ms <= k < stop_ms}
    return replace(
        state,
        done=state.done.without_range(lo, hi),
        marked=state.marked.without_range(lo, hi),
        removed=state.removed.without_range(lo, hi),
        failed=_frozen(failed),
    )


def catch_up_floor(job: Job, grid: Grid, now: int) -> int:
    """The first partition that may still start at `now`: 0 without `catch_up`."""
    if job.catch_up is None:
        return 0
    return max(grid.ceil(add(now, job.catch_up.negated())), 0)
