"""The TaskExecutorService: the worker's bounded pool of executor calls (the seed's fixed
thread pool with an unbounded queue), so the backends are never flooded by due tasks. Not a
`ThreadPoolExecutor`, which builds a Future (a lock and a condition) per call; outcomes travel
back through the partitions' own channel.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from scheduler import metrics

logger = logging.getLogger(__name__)

_STOP = None


class TaskExecutorService:
    """Runs calls on at most `pool_size` threads; one per worker, shared by its partitions."""

    def __init__(self, pool_size: int) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.pool_size = pool_size
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._running = 0
        self._peak = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"task-executor-{i}", daemon=True)
            for i in range(pool_size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, call: Callable[[], None]) -> None:
        """Queue `call`; it must report its own outcome and not raise."""
        self._queue.put(call)

    def _work(self) -> None:
        take, lock = self._queue.get, self._lock
        while (call := take()) is not _STOP:
            with lock:
                self._running += 1
                if self._running > self._peak:
                    self._peak = self._running
            metrics.RUNNING.inc()
            try:
                call()
            except Exception:
                logger.exception("an executor call escaped its outcome handler")
            finally:
                metrics.RUNNING.dec()
                with lock:
                    self._running -= 1

    @property
    def queued(self) -> int:
        """Calls waiting for a thread."""
        return self._queue.qsize()

    @property
    def peak_running(self) -> int:
        """The most calls ever running at once (tests check the bound with it)."""
        return self._peak

    def shutdown(self, wait: bool = True) -> None:
        """Stop the threads after the calls already queued."""
        for _ in self._threads:
            self._queue.put(_STOP)
        if wait:
            for thread in self._threads:
                thread.join()
