"""The batch configuration: the seed's JSON file, as its users wrote it, plus optional fields.

The seed's file (every field of it required, as in the seed)::

    {"max_parallelism": 10, "scheduler_polling_time": "1000 millis",
     "new_configuration_polling_time": "2 minutes",
     "jobs": [{"name": "job1", "start_partition": "2000-01-01 00:00:00",
               "end_partition": "2000-01-03 00:00:00", "increment": "1 hours",
               "command": ["/bin/echo", "[[partition]]"],
               "dependencies": [{"name": "job1", "shift": "-1 hours"}],
               "max_parallelism": 6, "on_failure": "retry", "retry_delay": "15 minutes",
               "retention": "30 days", "stdout_path": "out[[partition]].txt",
               "stderr_path": "err[[partition]].txt"}]}

What we add, all optional: `program` or `spark_job` (a registered program or PySpark job, with
`arguments`) instead of `command`; `max_attempts`, `retry_backoff` and `max_retry_delay` for
`retry`; `catch_up` (how far back from now partitions still start); and range dependencies
``{"name": "hourly", "from": "0 hours", "to": "1 days"}``. `parse_configuration` reports every
problem of a file at once (`BatchConfigError.problems`). See docs/batch-jobs.md.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.batch.durations import Duration, add, format_partition
from scheduler.batch.errors import BatchConfigError
from scheduler.batch.reader import Reader

MAX_NAME_BYTES = 200
"""A job's name goes into the keys of its tasks (``job:<name>/<partition>``), which the engine
limits in length; '/' separates the name from the partition there."""


class OnFailure(enum.StrEnum):
    """What a failed run of a partition leads to."""

    RETRY = "retry"
    """Run it again after the retry delay (until it succeeds, or `max_attempts` runs)."""
    MARK_SUCCESS = "mark_success"
    """Record it as MARKED_SUCCESS: dependants go on, the history still shows the failure."""


@dataclass(frozen=True, slots=True)
class FailurePolicy:
    """The failure behaviour of a job; a run keeps the one in force when it started."""

    on_failure: OnFailure
    retry_delay: Duration
    max_attempts: int | None = None
    """Runs of one partition at most (retry only); None retries forever, as the seed does."""
    retry_backoff: float = 1.0
    """Each retry waits this many times longer than the one before (1 keeps the seed's fixed
    delay)."""
    max_retry_delay: Duration | None = None
    """The longest wait between two runs, whatever the backoff."""

    def retry_at(self, ended_ms: int, attempts: int) -> int | None:
        """When a partition that failed its `attempts`-th run at `ended_ms` runs again; None
        when it does not (mark_success, or the attempt limit reached)."""
        if self.on_failure is OnFailure.MARK_SUCCESS:
            return None
        if self.max_attempts is not None and attempts >= self.max_attempts:
            return None
        base = add(ended_ms, self.retry_delay) - ended_ms
        delay = int(base * self.retry_backoff ** max(attempts - 1, 0))
        if self.max_retry_delay is not None:
            delay = min(delay, add(ended_ms, self.max_retry_delay) - ended_ms)
        return ended_ms + delay


@dataclass(frozen=True, slots=True)
class Dependency:
    """Partitions of `job` a partition P waits for: the one at P + `shift` (the seed's form), or
    with `to`, every partition of `job` in [P + shift, P + to)."""

    job: str
    shift: Duration
    to: Duration | None = None

    @property
    def is_range(self) -> bool:
        return self.to is not None


@dataclass(frozen=True, slots=True)
class Job:
    """One job of the configuration: a partition at start + n x increment for every n >= 0
    before `end`, each run once its time has passed and its dependencies succeeded."""

    name: str
    start: int
    """Epoch ms (UTC) of the first partition."""
    end: int
    """Epoch ms (UTC); partitions are before it (exclusive)."""
    increment: Duration
    dependencies: tuple[Dependency, ...]
    max_parallelism: int
    """Runs of this job at once at most; 0 pauses the job."""
    failure: FailurePolicy
    retention: Duration
    command: tuple[str, ...] | None = None
    """argv, run without a shell; ``[[partition]]`` in any item is replaced."""
    program: str | None = None
    spark_job: str | None = None
    arguments: Mapping[str, str] = field(default_factory=dict)
    """Arguments of a program or Spark job run; ``[[partition]]`` in a value is replaced."""
    stdout_path: str | None = None
    stderr_path: str | None = None
    catch_up: Duration | None = None
    """Partitions older than now minus this never start (SKIPPED); None: every partition runs."""


@dataclass(frozen=True, slots=True)
class Configuration:
    """A whole configuration file, checked."""

    max_parallelism: int
    """Runs of all jobs at once at most; 0 pauses every job."""
    scheduler_polling_time: Duration
    new_configuration_polling_time: Duration
    jobs: tuple[Job, ...]

    def job(self, name: str) -> Job:
        """The job named `name`; KeyError names the jobs there are."""
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(f"no job is named {name!r}; the jobs are {[j.name for j in self.jobs]}")

    @property
    def by_name(self) -> dict[str, Job]:
        return {job.name: job for job in self.jobs}


_TOP = ("max_parallelism", "scheduler_polling_time", "new_configuration_polling_time", "jobs")
_JOB_SEED = (
    "name", "start_partition", "end_partition", "increment", "command", "dependencies",
    "max_parallelism", "on_failure", "retry_delay", "retention", "stdout_path", "stderr_path",
)  # fmt: skip
_JOB_OURS = (
    "program", "spark_job", "arguments", "max_attempts", "retry_backoff", "max_retry_delay",
    "catch_up",
)  # fmt: skip
_RUNNABLES = ("command", "program", "spark_job")


def parse_configuration(data: str | bytes | Mapping[str, Any]) -> Configuration:
    """A checked Configuration from the file's text (or its parsed JSON). BatchConfigError
    lists every problem at once, each with its path, its job and what to write instead: the
    seed's ``parseConfigurationTest``."""
    reader = Reader()
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as error:
            reader.problem("", f"the file is not JSON ({error}); fix the syntax")
            raise BatchConfigError(reader.problems) from None
    if not isinstance(data, Mapping):
        reader.problem("", f"must be a JSON object with {', '.join(_TOP)}")
        raise BatchConfigError(reader.problems)
    reader.only(data, "", _TOP)
    max_parallelism = reader.count(data, "", "max_parallelism")
    polling = reader.duration(data, "", "scheduler_polling_time", nonzero=True)
    reload = reader.duration(data, "", "new_configuration_polling_time", nonzero=True)
    raw_jobs = reader.array(data, "", "jobs")
    jobs = [_job(reader, item, f"jobs[{i}]") for i, item in enumerate(raw_jobs or [])]
    _check_names(reader)
    _check_grids(reader, jobs)
    if reader.problems:
        raise BatchConfigError(reader.problems)
    assert max_parallelism is not None and polling is not None and reload is not None
    return Configuration(max_parallelism, polling, reload, tuple(j for j in jobs if j))


def _job(reader: Reader, data: Any, path: str) -> Job | None:
    if not isinstance(data, Mapping):
        reader.problem(path, "a job must be a JSON object")
        return None
    name = reader.string(data, path, "name")
    if name is not None and (
        len(name.encode()) > MAX_NAME_BYTES or any(ord(c) < 32 or c == "/" for c in name)
    ):
        reader.problem(
            f"{path}.name",
            f"{name[:40]!r} cannot name a job: keep it under {MAX_NAME_BYTES} bytes, "
            "without '/' or control characters",
            name,
        )
    if name is not None:
        reader.names.append((f"{path}.name", name))
    reader.job = name
    try:
        return _job_fields(reader, data, path, name)
    finally:
        reader.job = None


def _job_fields(reader: Reader, data: Mapping[str, Any], path: str, name: str | None) -> Job | None:
    reader.only(data, path, _JOB_SEED + _JOB_OURS)
    start = reader.partition(data, path, "start_partition")
    end = reader.partition(data, path, "end_partition")
    if start is not None and end is not None and end < start:
        reader.problem(
            f"{path}.end_partition",
            f"{format_partition(end)} is before start_partition {format_partition(start)}; "
            "the end is exclusive: give it at or after the start",
        )
    increment = reader.duration(data, path, "increment", nonzero=True)
    if increment is not None and increment.millis % 1000:
        reader.problem(
            f"{path}.increment",
            f"{increment} is not a whole number of seconds; partitions are named to the second",
        )
    runnable = [key for key in _RUNNABLES if key in data]
    command = program = spark_job = None
    if len(runnable) != 1:
        reader.problem(path, "give exactly one of command (argv), program or spark_job")
    elif runnable[0] == "command":
        command = reader.command(data, path, "command")
    else:
        program = reader.string(data, path, "program") if "program" in data else None
        spark_job = reader.string(data, path, "spark_job") if "spark_job" in data else None
    arguments = reader.string_map(data, path, "arguments") if "arguments" in data else {}
    if arguments and "command" in data:
        reader.problem(f"{path}.arguments", "a command takes its arguments in its argv list")
    dependencies = _dependencies(reader, data, path, name)
    max_parallelism = reader.count(data, path, "max_parallelism")
    failure = _failure(reader, data, path)
    retention = reader.duration(data, path, "retention")
    catch_up = reader.duration(data, path, "catch_up") if "catch_up" in data else None
    needs_paths = command is not None or "command" in data
    stdout = reader.string(data, path, "stdout_path", required=needs_paths)
    stderr = reader.string(data, path, "stderr_path", required=needs_paths)
    if None in (name, start, end, increment, max_parallelism, failure, retention):
        return None
    assert name and start is not None and end is not None and increment and failure
    assert max_parallelism is not None and retention is not None
    return Job(
        name, start, end, increment, dependencies, max_parallelism, failure, retention,
        command, program, spark_job, arguments, stdout, stderr, catch_up,
    )  # fmt: skip


def _dependencies(
    reader: Reader, data: Mapping[str, Any], path: str, name: str | None
) -> tuple[Dependency, ...]:
    found: list[Dependency] = []
    for i, item in enumerate(reader.array(data, path, "dependencies") or []):
        where = f"{path}.dependencies[{i}]"
        if not isinstance(item, Mapping):
            reader.problem(where, 'a dependency must be an object: {"name": ..., "shift": ...}')
            continue
        reader.only(item, where, ("name", "shift", "from", "to"))
        job = reader.string(item, where, "name")
        if job is not None:
            reader.references.append((f"{where}.name", name, job))
        if "shift" in item and ("from" in item or "to" in item):
            reader.problem(where, "give either shift (one partition) or from and to (a range)")
            continue
        if "shift" in item or "from" not in item:
            shift = reader.duration(item, where, "shift", signed=True)
            to = None
        else:
            shift = reader.duration(item, where, "from", signed=True)
            to = reader.duration(item, where, "to", signed=True)
            if shift is not None and to is not None and _not_after(to, shift):
                reader.problem(f"{where}.to", f"{to} must be after from ({shift})")
        if job is not None and shift is not None and (to is not None or "to" not in item):
            if job == name and to is None and not shift.is_negative:
                reader.problem(
                    f"{where}.shift",
                    f"a job waiting for its own partition {shift} later can never run; "
                    "give a negative shift (e.g. '-1 hours')",
                )
            found.append(Dependency(job, shift, to))
    return tuple(found)


def _not_after(to: Duration, start: Duration) -> bool:
    if to.months == start.months:
        return to.millis <= start.millis
    if to.millis == start.millis:
        return to.months <= start.months
    return False


def _failure(reader: Reader, data: Mapping[str, Any], path: str) -> FailurePolicy | None:
    on_failure = reader.string(data, path, "on_failure")
    if on_failure is not None and on_failure.lower() not in set(OnFailure):
        reader.problem(
            f"{path}.on_failure", f"{on_failure!r} is unknown; use retry or mark_success"
        )
        on_failure = None
    delay = reader.duration(data, path, "retry_delay")
    attempts = (
        reader.count(data, path, "max_attempts", minimum=1) if "max_attempts" in data else None
    )
    backoff = reader.number(data, path, "retry_backoff", 1.0) if "retry_backoff" in data else 1.0
    longest = reader.duration(data, path, "max_retry_delay") if "max_retry_delay" in data else None
    if on_failure is None or delay is None or backoff is None:
        return None
    return FailurePolicy(OnFailure(on_failure.lower()), delay, attempts, backoff, longest)


def _check_names(reader: Reader) -> None:
    seen: set[str] = set()
    for path, name in reader.names:
        if name in seen:
            reader.problem(path, "this name is already used; give each job its own", name)
        seen.add(name)
    for path, job, named in reader.references:
        if named not in seen:
            reader.problem(path, f"no job is named {named!r}; the jobs are {sorted(seen)}", job)


def _check_grids(reader: Reader, jobs: list[Job | None]) -> None:
    """A dependency that lands between the partitions of its job for every partition (an
    hourly job on another's P + 30 minutes) is a mistake the check can see: refuse it."""
    by_name = {job.name: job for job in jobs if job is not None}
    for i, job in enumerate(jobs):
        for d, dependency in enumerate(job.dependencies if job else ()):
            target = by_name.get(dependency.job)
            if job is None or target is None or dependency.to is not None:
                continue
            shift = dependency.shift
            if shift.millis % 1000:
                reader.problem(
                    f"jobs[{i}].dependencies[{d}].shift",
                    f"{shift} is not a whole number of seconds: no partition is ever there",
                    job.name,
                )
                continue
            steps = (job.increment.millis, target.increment.millis)
            if job.increment.months or target.increment.months or shift.months:
                continue
            gap = (job.start + shift.millis - target.start) % math.gcd(*steps)
            if gap:
                reader.problem(
                    f"jobs[{i}].dependencies[{d}].shift",
                    f"P + {shift} is never a partition of {target.name}: it always falls "
                    f"{gap // 1000} s after one; change the shift or start_partition by that",
                    job.name,
                )
