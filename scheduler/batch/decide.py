"""Which partitions start now, and where any one partition stands.

A partition P is RUNNABLE once its time has passed (P + increment at or before now), it is not
done, running, removed or waiting for a retry, it is within the job's `catch_up` reach, and every
dependency partition is done (succeeded or marked success). `runnable` hands out free slots to
the oldest runnable partitions first (ties: the job written first), under the global and the
per-job limits, the tighter one winning; a limit of 0 pauses.

Nothing is listed: each job is scanned from its first partition not done, and the scan stops at
the first partition not yet due, and as soon as a dependency reaches past everything its
upstream job has done (later partitions reach further still). The cost of a decision grows with
the partitions started and the ones blocked in between, not with the length of the grid.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import islice

from scheduler.batch.config import Configuration, Job
from scheduler.batch.durations import format_partition
from scheduler.batch.partitions import Grid, Launch, Never, Upstream, launch, upstream
from scheduler.batch.state import JobState, Status, catch_up_floor, new_state

_VIEW_DEPTH = 32
"""How many dependency levels `view` follows to tell a wait that can never end."""


@dataclass(frozen=True, slots=True)
class View:
    """One partition as an operator reads it."""

    job: str
    partition: int
    """Epoch ms (UTC)."""
    status: Status
    waiting_for: tuple[str, ...] = ()
    """The dependency partitions not done yet (``job1 2000-01-01 00:00:00``)."""
    reason: str | None = None
    """Why it is BLOCKED_FOREVER, SKIPPED or REMOVED, or why its last run FAILED."""
    retry_at: int | None = None
    attempts: int = 0

    @property
    def name(self) -> str:
        return format_partition(self.partition)


class _Blocked(Exception):
    """Internal: a dependency of the partition being checked can never be met."""


def _states(config: Configuration, states: Mapping[str, JobState]) -> dict[str, JobState]:
    return {job.name: states.get(job.name) or new_state(job) for job in config.jobs}


def _dependency_status(
    job: Job,
    grid: Grid,
    n: int,
    config: Configuration,
    states: Mapping[str, JobState],
    now: int,
    depth: int,
    memo: dict[tuple[str, int], View],
) -> tuple[list[str], list[str]]:
    """(blocked reasons, partitions waited for) of partition n of `job`."""
    blocked: list[str] = []
    waiting: list[str] = []
    for dependency in job.dependencies:
        target = states[dependency.job]
        found = upstream(grid, n, dependency, target.grid)
        if isinstance(found, Never):
            blocked.append(found.reason)
            continue
        upstream_job = config.job(dependency.job)
        for m in range(found.first, found.stop):
            if m in target.done:
                continue
            label = f"{dependency.job} {format_partition(target.grid.at(m))}"
            inner = (
                _view(upstream_job, m, config, states, now, depth + 1, memo)
                if depth < _VIEW_DEPTH
                else None
            )
            if inner is not None and inner.status is Status.BLOCKED_FOREVER:
                blocked.append(f"{label} is blocked forever ({inner.reason})")
            elif inner is not None and inner.status in (Status.REMOVED, Status.SKIPPED):
                blocked.append(f"{label} is {inner.status.value} ({inner.reason})")
            elif inner is not None and inner.status is Status.FAILED and inner.retry_at is None:
                blocked.append(f"{label} failed for good ({inner.reason}); rerun it")
            else:
                waiting.append(label)
    return blocked, waiting


def _view(
    job: Job,
    n: int,
    config: Configuration,
    states: Mapping[str, JobState],
    now: int,
    depth: int,
    memo: dict[tuple[str, int], View],
) -> View:
    # Dependants of a chain ask for the same upstream partitions again and again: each is
    # judged once per question, so a view costs partitions x dependencies, never more.
    known = memo.get((job.name, n))
    if known is None:
        known = memo[job.name, n] = _judge(job, n, config, states, now, depth, memo)
    return known


def _judge(
    job: Job,
    n: int,
    config: Configuration,
    states: Mapping[str, JobState],
    now: int,
    depth: int,
    memo: dict[tuple[str, int], View],
) -> View:
    state = states[job.name]
    grid, ms = state.grid, state.grid.at(n)
    recorded = state.status_of_record(n)
    failure = state.failed.get(ms)
    if recorded is Status.FAILED and failure is not None:
        if failure.retry_at is None or failure.retry_at > now:
            return View(job.name, ms, Status.FAILED, (), failure.reason, failure.retry_at,
                        failure.attempts)  # fmt: skip
    elif recorded is Status.REMOVED:
        return View(job.name, ms, recorded, (), "failed for good; retention deleted its record")
    elif recorded is Status.RUNNING:
        return View(job.name, ms, recorded, attempts=state.running[ms].attempt)
    elif recorded is not None:
        return View(job.name, ms, recorded)
    attempts = failure.attempts if failure else 0
    if n >= grid.due(now):
        return View(job.name, ms, Status.WAITING_TIME, attempts=attempts)
    if n < catch_up_floor(job, grid, now):
        return View(job.name, ms, Status.SKIPPED, (), f"older than catch_up ({job.catch_up})")
    blocked, waiting = _dependency_status(job, grid, n, config, states, now, depth, memo)
    if blocked:
        return View(job.name, ms, Status.BLOCKED_FOREVER, tuple(waiting), "; ".join(blocked))
    if waiting:
        return View(job.name, ms, Status.WAITING_DEPENDENCIES, tuple(waiting), attempts=attempts)
    return View(job.name, ms, Status.RUNNABLE, attempts=attempts)


def view(
    config: Configuration, states: Mapping[str, JobState], job: str, partition_ms: int, now: int
) -> View:
    """Where the partition of `job` at `partition_ms` stands at `now`, with what it waits for or
    why it never will run; ValueError when it is not a partition of the job."""
    full = _states(config, states)
    grid = full[job].grid
    n = grid.index_of(partition_ms)
    if n is None or not 0 <= n < grid.count:
        raise ValueError(f"{format_partition(partition_ms)} is not a partition of {job}")
    return _view(config.job(job), n, config, full, now, 0, {})


def views(
    config: Configuration,
    states: Mapping[str, JobState],
    job: str,
    now: int,
    first: int = 0,
    limit: int = 1000,
) -> list[View]:
    """Up to `limit` partitions of `job` from index `first`, oldest first."""
    full = _states(config, states)
    grid = full[job].grid
    stop = min(grid.count, first + limit)
    memo: dict[tuple[str, int], View] = {}
    return [_view(config.job(job), n, config, full, now, 0, memo) for n in range(first, stop)]


def _candidates(
    job: Job, config: Configuration, states: Mapping[str, JobState], now: int
) -> Iterator[int]:
    """The runnable partitions of `job` (epoch ms), oldest first, found lazily."""
    state = states[job.name]
    grid = state.grid
    due = grid.due(now)
    n = state.done.next_missing(catch_up_floor(job, grid, now))
    while n < due:
        ms = grid.at(n)
        failure = state.failed.get(ms)
        ready = ms not in state.running and n not in state.removed
        if ready and failure is not None:
            ready = failure.retry_at is not None and failure.retry_at <= now
        if ready:
            for dependency in job.dependencies:
                target = states[dependency.job]
                found = upstream(grid, n, dependency, target.grid)
                if isinstance(found, Never):
                    if found.later_too:
                        return
                    ready = False
                    break
                if not target.done.covers(found.first, found.stop):
                    last = target.done.last
                    if _beyond(found, last):
                        return  # later partitions reach further past what is done
                    ready = False
                    break
        if ready:
            yield ms
        n = state.done.next_missing(n + 1)


def _beyond(found: Upstream, last_done: int | None) -> bool:
    return last_done is None or found.stop - 1 > last_done


def _tagged(partitions: Iterator[int], order: int) -> Iterator[tuple[int, int]]:
    for ms in partitions:
        yield ms, order


def runnable(config: Configuration, states: Mapping[str, JobState], now: int) -> list[Launch]:
    """The partitions to start at `now`, oldest first, within the free slots: the global
    `max_parallelism` minus every run in progress (jobs removed by a reload included), and each
    job's own limit minus its runs. The engine starts each as a run keyed `Launch.key`, then
    records it with `state.start`."""
    full = _states(config, states)
    in_progress = sum(len(state.running) for state in states.values())
    free = config.max_parallelism - in_progress
    if free <= 0:
        return []
    streams = []
    for order, job in enumerate(config.jobs):
        slots = job.max_parallelism - len(full[job.name].running)
        if slots > 0:
            found = islice(_candidates(job, config, full, now), min(slots, free))
            streams.append(_tagged(found, order))
    chosen = islice(heapq.merge(*streams), free)
    return [launch(config.jobs[order], ms) for ms, order in chosen]


@dataclass(frozen=True, slots=True)
class Summary:
    """Counts of a job's partitions, cheap to compute at any size (for metrics)."""

    total: int
    succeeded: int
    marked_success: int
    running: int
    failed: int
    removed: int
    waiting_time: int
    pending: int
    """Due and not finished, running or failed: waiting for dependencies, blocked or runnable."""
    oldest_pending: int | None
    """Epoch ms of the oldest of them."""


def summary(config: Configuration, states: Mapping[str, JobState], job: str, now: int) -> Summary:
    """How many partitions of `job` are in which state at `now`."""
    state = _states(config, states)[job]
    grid = state.grid
    total, due = grid.count, grid.due(now)
    done = state.done.count_between(0, total)
    marked = state.marked.count_between(0, total)
    indexes = [grid.index_of(ms) for ms in state.running]
    running = sum(1 for i in indexes if i is not None and 0 <= i < total)
    failed = len(state.failed)
    removed = len(state.removed)
    pending = max(due - done - running - failed - removed, 0)
    oldest = state.done.next_missing(0)
    while oldest < due and state.status_of_record(oldest) is not None:
        oldest = state.done.next_missing(oldest + 1)
    return Summary(
        total, done - marked, marked, running, failed, removed, total - due, pending,
        grid.at(oldest) if oldest < due else None,
    )  # fmt: skip
