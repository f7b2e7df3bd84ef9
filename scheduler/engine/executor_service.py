"""The TaskExecutorService: the worker's bounded pool of executor calls.

The seed bounds concurrent executions with "an ExecutorService with an unbounded waiting queue
backed by a fixed-size thread pool", so that the backends are never flooded by the number of due
tasks. A thread pool of `pool_size` threads does exactly that; the queue in front of it never
holds more than the partitions' in-flight bounds allow.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from scheduler import metrics


class TaskExecutorService:
    """Runs executor calls on at most `pool_size` threads; one per worker, shared by partitions."""

    def __init__(self, pool_size: int) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.pool_size = pool_size
        self._pool = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="task-executor")
        self._running = 0
        self._peak = 0
        self._lock = threading.Lock()

    def submit(self, call: Callable[[], None]) -> Future[None]:
        return self._pool.submit(self._counted, call)

    def _counted(self, call: Callable[[], None]) -> None:
        with self._lock:
            self._running += 1
            self._peak = max(self._peak, self._running)
        metrics.RUNNING.inc()
        try:
            call()
        finally:
            metrics.RUNNING.dec()
            with self._lock:
                self._running -= 1

    @property
    def running(self) -> int:
        return self._running

    @property
    def peak_running(self) -> int:
        """The most calls ever running at once (tests check the bound with it)."""
        return self._peak

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=True)
