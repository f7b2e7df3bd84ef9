"""Helpers for testing code that schedules tasks, in the spirit of dramatiq's StubBroker.

A complete test module (pytest collects it as written)::

    from datetime import UTC, datetime

    from scheduler import Task
    from scheduler.testing import embedded_engine


    def test_reminder_is_sent():
        sent = []
        with embedded_engine(lambda task, ctx: sent.append(task.data)) as engine:
            now = datetime.now(UTC)
            engine.client.schedule_task(Task("user-1", now, "reminder", {"to": "a@b"})).result()
            engine.join()
        assert sent == [{"to": "a@b"}]

`join()` waits until every due task reached a final state, then re-raises, in the test's
thread, the first exception an executor raised or the first failure of an engine actor, so
a broken task fails the test that caused it instead of vanishing into a log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from scheduler.embedded import EmbeddedScheduler
from scheduler.engine.settings import EngineSettings, RetryPolicy
from scheduler.errors import TaskCancelledError
from scheduler.executors.abc import ExecutionContext, Executor
from scheduler.model import Task
from scheduler.stores.abc import TaskStore

#: Fast retries, so tests that exercise failures finish quickly.
TEST_SETTINGS = EngineSettings(
    pool_size=4,
    retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05, jitter=0.0),
    shutdown_deadline_s=5.0,
    load_interval_ms=100,
    restart_backoff_s=0.05,
)


class FailureRecorder:
    """Wraps an executor and remembers the first exception it raised."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.first: BaseException | None = None
        self._lock = threading.Lock()

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        try:
            self.executor(task, context)
        except TaskCancelledError:
            raise
        except BaseException as error:
            with self._lock:
                if self.first is None:
                    self.first = error
            raise


class TestEngine(EmbeddedScheduler):
    """An embedded scheduler whose `join` re-raises failures in the calling thread."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, executor: Executor, **kwargs: object) -> None:
        self.recorder = FailureRecorder(executor)
        super().__init__(executor=self.recorder, **kwargs)  # type: ignore[arg-type]

    def join(
        self, timeout: float = 30.0, *, raise_failures: bool = True, include_future: bool = True
    ) -> None:
        """Wait until every accepted task is done (with `include_future=False`: every task due
        by now); then re-raise the first executor or actor failure, if any."""
        self.wait_until_idle(timeout, include_future=include_future)
        if not raise_failures:
            return
        if self.recorder.first is not None:
            raise self.recorder.first
        failures = self.worker.failures()
        if failures:
            raise failures[0].error


@contextmanager
def embedded_engine(
    executor: Executor,
    *,
    partitions: int = 4,
    settings: EngineSettings = TEST_SETTINGS,
    data_dir: str | Path | None = None,
    wrap_store: Callable[[TaskStore], TaskStore] | None = None,
) -> Iterator[TestEngine]:
    """Start an embedded engine for a test; stop it (and delete a temporary data dir) after.

    `wrap_store` lets a test put a fault-injecting wrapper between the engine and the store.
    """
    engine = TestEngine(
        executor, data_dir=data_dir, partitions=partitions, settings=settings, wrap_store=wrap_store
    )
    with engine:
        yield engine
