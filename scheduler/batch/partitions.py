"""A job's partitions as instants ``start + n x increment``, computed on demand, never listed.

One arithmetic (`scheduler.batch.durations`) generates partitions and matches dependencies, so a
dependency's ``P + shift`` lands exactly on the partition it names. Partition n of a job with a
calendar increment is the start moved by n x increment months, clamped once; a shift in months
moves along the same count (the partition of Apr 30 on a grid started Jan 31, minus 1 month, is
Mar 31, the partition before it, not Mar 30).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.batch.config import Dependency, Job
from scheduler.batch.durations import Duration, add, add_months, format_partition, month_index

PLACEHOLDER = "[[partition]]"


@dataclass(frozen=True, slots=True)
class Grid:
    """The partitions of one job: index n >= 0 is at `at(n)`; those before `end` exist."""

    start: int
    increment: Duration
    end: int

    @classmethod
    def of(cls, job: Job) -> Grid:
        return cls(job.start, job.increment, job.end)

    def at(self, n: int) -> int:
        """Epoch ms of partition n (n may be negative or past the end: the grid goes on)."""
        if self.increment.months:
            return add_months(self.start, n * self.increment.months)
        return self.start + n * self.increment.millis

    def floor(self, t: int) -> int:
        """The largest n with at(n) <= t."""
        if not self.increment.months:
            return (t - self.start) // self.increment.millis
        step = self.increment.months
        n = (month_index(t) - month_index(self.start)) // step
        while self.at(n) > t:
            n -= 1
        while self.at(n + 1) <= t:
            n += 1
        return n

    def ceil(self, t: int) -> int:
        """The smallest n with at(n) >= t."""
        n = self.floor(t)
        return n if self.at(n) == t else n + 1

    def index_of(self, t: int) -> int | None:
        """n when `t` is a grid point, else None (whether or not it is before the end)."""
        n = self.floor(t)
        return n if self.at(n) == t else None

    @property
    def count(self) -> int:
        """How many partitions the job has: those at or after the start and before the end."""
        return max(self.ceil(self.end), 0)

    def due(self, now: int) -> int:
        """How many partitions, from the first, have their time passed at `now`: partition n is
        due once at(n + 1), its P + increment, is at or before `now`."""
        return min(max(self.floor(now), 0), self.count)

    def shifted(self, n: int, shift: Duration) -> int:
        """Partition n moved by `shift`, months along the grid's own count."""
        if self.increment.months and shift.months:
            return add_months(self.start, n * self.increment.months + shift.months) + shift.millis
        return add(self.at(n), shift)


@dataclass(frozen=True, slots=True)
class Upstream:
    """The partitions [first, stop) of `job` that a dependency of one partition waits for."""

    job: str
    first: int
    stop: int


@dataclass(frozen=True, slots=True)
class Never:
    """A dependency that can never be met, and why, in words an operator can act on."""

    reason: str
    later_too: bool = False
    """Whether every later partition of the dependant meets the same fate (past the end)."""


def upstream(grid: Grid, n: int, dependency: Dependency, target: Grid) -> Upstream | Never:
    """The partitions of `dependency.job` (whose grid is `target`) that partition n of the job
    with `grid` waits for, or why they can never exist."""
    name = dependency.job
    low = grid.shifted(n, dependency.shift)
    if dependency.to is None:
        if low < target.start:
            return Never(f"{name} {format_partition(low)} is before {name}'s first partition")
        if low >= target.end:
            return Never(f"{name} {format_partition(low)} is at or after {name}'s end", True)
        m = target.index_of(low)
        if m is None:
            return Never(f"{format_partition(low)} is not a partition of {name} (off its grid)")
        return Upstream(name, m, m + 1)
    high = grid.shifted(n, dependency.to)
    span = f"[{format_partition(low)}, {format_partition(high)})"
    if low < target.start:
        return Never(f"{name} {span} starts before {name}'s first partition")
    first, stop = target.ceil(low), target.ceil(high)
    if stop > target.count:
        return Never(f"{name} {span} reaches {name}'s end", True)
    if first >= stop:
        return Never(f"{name} has no partition in {span}")
    return Upstream(name, first, stop)


def render(text: str, partition_ms: int) -> str:
    """`text` with every ``[[partition]]`` replaced by ``yyyy-MM-dd HH:mm:ss`` (UTC)."""
    return text.replace(PLACEHOLDER, format_partition(partition_ms))


@dataclass(frozen=True, slots=True)
class Launch:
    """What the engine runs for one partition: argv (never a shell) or a program / Spark job
    with arguments, and where its output goes."""

    job: str
    partition: int
    argv: tuple[str, ...] | None
    program: str | None
    spark_job: str | None
    arguments: dict[str, str]
    stdout_path: str | None
    stderr_path: str | None

    @property
    def key(self) -> str:
        """The uniqueness key of the partition's run: ``job:<name>/<yyyy-MM-dd HH:mm:ss>``."""
        return partition_key(self.job, self.partition)


def partition_key(job: str, partition_ms: int) -> str:
    """``job:<name>/<partition>``: names one partition of one job in keys and in messages."""
    return f"job:{job}/{format_partition(partition_ms)}"


def launch(job: Job, partition_ms: int) -> Launch:
    """The run of `job` for the partition at `partition_ms`, templates applied."""
    arguments = {key: render(value, partition_ms) for key, value in job.arguments.items()}
    arguments.setdefault("partition", format_partition(partition_ms))
    return Launch(
        job=job.name,
        partition=partition_ms,
        argv=None if job.command is None else tuple(render(a, partition_ms) for a in job.command),
        program=job.program,
        spark_job=job.spark_job,
        arguments=arguments if job.command is None else {},
        stdout_path=None if job.stdout_path is None else render(job.stdout_path, partition_ms),
        stderr_path=None if job.stderr_path is None else render(job.stderr_path, partition_ms),
    )
