"""The batch jobs' gauges (`scheduler_batch_*`), set after each task of the batch queue for the
jobs it changed (for every job at a wake, when ages move on)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from scheduler import metrics
from scheduler.batch.config import Configuration
from scheduler.batch.decide import summary
from scheduler.batch.state import JobState

_STATES = (
    "succeeded", "marked_success", "running", "failed", "removed", "waiting_time", "pending",
)  # fmt: skip


def observe(
    config: Configuration,
    states: Mapping[str, JobState],
    now: int,
    jobs: Collection[str] | None = None,
) -> None:
    """Set the gauges of `jobs` (default: every job of `config`) from `states` at `now`."""
    for job in config.jobs:
        state = states.get(job.name)
        if state is None or (jobs is not None and job.name not in jobs):
            continue
        # A summary reads one job's state: a one-job configuration keeps it O(1) in the jobs.
        counts = summary(replace(config, jobs=(job,)), {job.name: state}, job.name, now)
        for name in _STATES:
            metrics.BATCH_PARTITIONS.labels(job.name, name).set(getattr(counts, name))
        oldest = counts.oldest_pending
        age = 0.0 if oldest is None else max(now - oldest, 0) / 1000
        metrics.BATCH_OLDEST_PENDING.labels(job.name).set(age)
