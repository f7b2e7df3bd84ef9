"""Why a schedule's job waits, in words for the CLI, the API and the dashboard: the trigger
parts its events do not satisfy yet (`scheduler.schedules.events`), or the constraints it is
checked against."""

from __future__ import annotations

from scheduler.schedules.events import counted, is_satisfied
from scheduler.schedules.job import Job, JobState
from scheduler.schedules.model import (
    Concurrency,
    Constraint,
    Delay,
    LastRun,
    Leaf,
    Partition,
    Time,
    TimeRange,
    leaves,
)


def waiting_on(job: Job) -> list[str]:
    """What the open `job` waits for; empty for a job that launched or ended."""
    zone = job.schedule.time_zone
    if job.state is JobState.PENDING_TRIGGER:
        return [
            _leaf(leaf, job, zone)
            for leaf in leaves(job.schedule.trigger)
            if not is_satisfied(leaf, job.events, zone)
        ]
    if job.state is JobState.PENDING_CONSTRAINT:
        return [_constraint(rule) for rule in job.schedule.constraints]
    return []


def _leaf(leaf: Leaf, job: Job, zone: str) -> str:
    if isinstance(leaf, Time):
        return f"TIME trigger {leaf.cron!r}: its next fire"
    if isinstance(leaf, Partition):
        landed = sum(event.count for event in counted(leaf, job.events, zone))
        return f"PARTITION trigger on {leaf.dataset}: {landed} of {leaf.num_partitions} partitions"
    statuses = ", ".join(sorted(status.value for status in leaf.statuses))
    return f"PROGRAM_STATUS trigger: a run of {leaf.program} ending {statuses}"


def _constraint(rule: Constraint) -> str:
    if isinstance(rule, Concurrency):
        return f"CONCURRENCY constraint: at most {rule.max_concurrency} run(s) at once"
    if isinstance(rule, Delay):
        return f"DELAY constraint: {rule.millis} ms after the trigger"
    if isinstance(rule, TimeRange):
        return f"TIME_RANGE constraint: between {rule.start} and {rule.end}"
    assert isinstance(rule, LastRun)
    return f"LAST_RUN constraint: {rule.millis} ms since the last run"
