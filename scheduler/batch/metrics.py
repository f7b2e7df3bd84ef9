"""The batch jobs' gauges (`scheduler_batch_*`), set after each decision of the batch queue."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler import metrics
from scheduler.batch.config import Configuration
from scheduler.batch.decide import summary
from scheduler.batch.state import JobState

_STATES = (
    "succeeded", "marked_success", "running", "failed", "removed", "waiting_time", "pending",
)  # fmt: skip


def observe(config: Configuration, states: Mapping[str, JobState], now: int) -> None:
    """Set the gauges of every job of `config` from `states` at `now`."""
    for job in config.jobs:
        counts = summary(config, states, job.name, now)
        for state in _STATES:
            metrics.BATCH_PARTITIONS.labels(job.name, state).set(getattr(counts, state))
        oldest = counts.oldest_pending
        age = 0.0 if oldest is None else max(now - oldest, 0) / 1000
        metrics.BATCH_OLDEST_PENDING.labels(job.name).set(age)
