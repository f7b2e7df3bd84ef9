"""The jobs-per-state gauge (`scheduler_schedule_jobs{state}`), kept by whoever writes a job.

Its own module because both the fire path (executor.py) and the schedule changes (lifecycle.py)
move jobs between states, and the executor imports the lifecycle.
"""

from __future__ import annotations

from scheduler import metrics
from scheduler.schedules.job import JobState


def jobs_moved(before: JobState | None, after: JobState | None) -> None:
    """Keep the jobs-per-state gauge: a job written from `before` to `after` (None: not stored)."""
    if before == after:
        return
    if before is not None:
        metrics.SCHEDULE_JOBS.labels(str(before)).dec()
    if after is not None:
        metrics.SCHEDULE_JOBS.labels(str(after)).inc()
