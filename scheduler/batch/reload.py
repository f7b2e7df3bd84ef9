"""A new configuration applied to the state of the old one, as a diff: nothing is rebuilt and
no run is interrupted.

* An added job starts with no partition run.
* A removed job keeps its state while runs of it are in progress, so that they count against
  the global limit and their ends are recorded; `prune` drops it once they ended.
* A changed job keeps what its partitions did. Records are re-indexed on the new grid by their
  instant: moving `start_partition` earlier back-fills the new partitions before it, moving it
  later keeps the old records (outside the job's partitions now, they wait only for retention).
  A record whose instant is not a partition of the new grid stays in the run history only.
  A run in progress keeps the failure policy it started with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from scheduler.batch.config import Configuration, Job
from scheduler.batch.intervals import Intervals
from scheduler.batch.partitions import Grid
from scheduler.batch.state import JobState, new_state

_FIELD_NAMES = {
    "start": "start_partition",
    "end": "end_partition",
    "failure": "on_failure / retry",
}


@dataclass(frozen=True, slots=True)
class Diff:
    """What a reload changes, job by job."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: Mapping[str, tuple[str, ...]]
    """Job name -> the fields that changed (as the file names them)."""
    settings_changed: tuple[str, ...]
    """Global fields that changed."""

    @property
    def is_empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.settings_changed)


def diff(old: Configuration, new: Configuration) -> Diff:
    """The jobs added, removed and changed (with which fields) from `old` to `new`."""
    before, after = old.by_name, new.by_name
    changed: dict[str, tuple[str, ...]] = {}
    for name in before.keys() & after.keys():
        names = tuple(
            _FIELD_NAMES.get(f.name, f.name)
            for f in fields(Job)
            if getattr(before[name], f.name) != getattr(after[name], f.name)
        )
        if names:
            changed[name] = names
    settings = tuple(
        f.name
        for f in fields(Configuration)
        if f.name != "jobs" and getattr(old, f.name) != getattr(new, f.name)
    )
    return Diff(
        added=tuple(j.name for j in new.jobs if j.name not in before),
        removed=tuple(j.name for j in old.jobs if j.name not in after),
        changed=dict(sorted(changed.items())),
        settings_changed=settings,
    )


def _regrid(intervals: Intervals, old: Grid, new: Grid) -> Intervals:
    if old.increment == new.increment and not new.increment.months:
        offset, rest = divmod(old.start - new.start, new.increment.millis)
        if rest == 0:
            return intervals.shifted(offset)
    kept = (new.index_of(old.at(n)) for n in intervals)
    return Intervals((m, m + 1) for m in kept if m is not None)


def regrid(state: JobState, job: Job) -> JobState:
    """`state` re-indexed on the grid of `job` (its start, increment or end changed)."""
    grid = Grid.of(job)
    if grid == state.grid:
        return state
    return replace(
        state,
        grid=grid,
        done=_regrid(state.done, state.grid, grid),
        marked=_regrid(state.marked, state.grid, grid),
        removed=_regrid(state.removed, state.grid, grid),
    )


def apply(
    old: Configuration, new: Configuration, states: Mapping[str, JobState]
) -> tuple[Diff, dict[str, JobState]]:
    """The diff from `old` to `new`, and the job states under `new`."""
    change = diff(old, new)
    result: dict[str, JobState] = {}
    for job in new.jobs:
        state = states.get(job.name)
        result[job.name] = new_state(job) if state is None else regrid(state, job)
    for name in change.removed:
        state = states.get(name)
        if state is not None and state.running:
            result[name] = state
    return change, result


def prune(config: Configuration, states: Mapping[str, JobState]) -> dict[str, JobState]:
    """The states without those of removed jobs whose last run ended."""
    names = {job.name for job in config.jobs}
    return {k: v for k, v in states.items() if k in names or v.running}
