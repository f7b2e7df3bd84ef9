"""Typed settings of the engine, passed to constructors (only the CLI reads files and env)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with jitter, then FAILED."""

    max_attempts: int = 5
    """Attempts in all, the first included; after the last failure the task is FAILED."""
    base_delay_s: float = 1.0
    """Delay before the first retry; each later retry doubles it."""
    max_delay_s: float = 300.0
    """Upper bound of the delay between two attempts."""
    jitter: float = 0.2
    """Each delay is multiplied by a random factor in [1 - jitter, 1 + jitter]."""

    def delay_s(self, failed_attempts: int, random_unit: float) -> float:
        """Delay after `failed_attempts` failures; `random_unit` is uniform in [0, 1)."""
        delay = min(self.max_delay_s, self.base_delay_s * 2.0 ** (failed_attempts - 1))
        return delay * (1 - self.jitter + 2 * self.jitter * random_unit)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings:
    """How a worker's engine runs its partitions."""

    pool_size: int = 8
    """Executor calls running at once in the worker (the TaskExecutorService bound)."""
    max_in_flight_per_partition: int = 2000
    """Tasks a partition holds in memory (scheduled, queued or running) before it stops loading."""
    lookahead_ms: int = 2000
    """How far ahead of now a partition loads tasks from the store into its in-memory schedule."""
    load_interval_ms: int = 500
    """How often the ThroughputController tops a partition up (it also reacts to completions)."""
    retry: RetryPolicy = RetryPolicy()
    """Backoff and attempt limit for failed tasks."""
    task_timeout_s: float | None = None
    """Cancel an attempt that runs longer than this (None: no limit)."""
    shutdown_deadline_s: float = 30.0
    """On revocation or shutdown, how long running tasks may finish before they are cancelled."""
    poll_max_records: int = 5000
    """Records taken from the log per poll and persisted as one batch."""
    status_flush_ms: int = 20
    """Status writes are batched for up to this long."""
    restart_backoff_s: float = 1.0
    """Wait before restarting a partition whose actor tree failed."""
