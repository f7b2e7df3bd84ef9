"""Executors and stores with knobs, for engine tests."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scheduler.actors.context import PartitionContext
from scheduler.engine.clock import SteppedClock
from scheduler.engine.settings import EngineSettings
from scheduler.engine.timers import TimerService
from scheduler.executors.abc import ExecutionContext, Executor
from scheduler.model import Task, TaskKey, from_epoch_ms
from scheduler.stores.abc import TaskStore
from scheduler.testing import TEST_SETTINGS, TestEngine


def soon(ms: int = 0) -> datetime:
    return datetime.now(UTC) + timedelta(milliseconds=ms)


#: Clock time a stepping join moves forward per look at the engine: under the test settings'
#: load interval (100 ms), so every top-up, retry and flush timer fires on its own step.
STEP_S = 0.05


class SteppedEngine(TestEngine):
    """An embedded engine on a `SteppedClock`: time moves only when the test steps it.

    `at(ms)` is a due time `ms` after the clock's now; `join` steps the clock until every
    accepted task is done, so a task due in an hour costs a test no more real time than one due
    now, and no test sleeps to let time pass."""

    __test__ = False

    def __init__(
        self, executor: Executor, clock: SteppedClock | None = None, **kwargs: object
    ) -> None:
        self.clock = clock or SteppedClock()
        super().__init__(executor, clock=self.clock, **kwargs)

    def at(self, ms: int = 0) -> datetime:
        """The instant `ms` milliseconds after the engine's clock reads now."""
        return from_epoch_ms(self.clock.now_ms() + ms)

    def join(
        self, timeout: float = 30.0, *, raise_failures: bool = True, include_future: bool = True
    ) -> None:
        """Once every accepted record is in the store, step the clock `STEP_S` at a time until
        every accepted task (with `include_future=False`, every task due now) is done; then as
        `TestEngine.join`. Time stands still until the log is drained, so no task falls due
        before one enqueued ahead of the join is stored, however slow the store is."""
        deadline = time.monotonic() + timeout
        self.wait_persisted(deadline)
        while not self.is_idle(include_future=include_future):
            if self.worker.fatal_error is not None:
                raise self.worker.fatal_error
            if time.monotonic() > deadline:
                raise TimeoutError(f"the scheduler was still busy after {timeout}s")
            self.clock.advance(STEP_S)
        super().join(timeout, raise_failures=raise_failures, include_future=include_future)

    def wait_persisted(self, deadline: float) -> None:
        """Wait (real time, up to `deadline` on `time.monotonic`) until the worker committed
        every record the client sent: offsets are committed once their tasks are stored. The
        clock moves only while a partition's tree is restarting (a bug in a batch write): the
        batch waits for the new tree, whose restart delay runs on this clock."""
        self.client.flush()
        group = self.worker.group_id
        while any(lag.lag > 0 for lag in self.log.describe_group(group)):
            if self.worker.fatal_error is not None:
                raise self.worker.fatal_error
            if time.monotonic() > deadline:
                raise TimeoutError("the worker did not store every record sent in time")
            if self.worker.health().restarting:
                self.clock.advance(STEP_S / 5)
                time.sleep(0.05)
            time.sleep(0.005)


@contextmanager
def stepped_engine(
    executor: Executor,
    *,
    partitions: int = 4,
    settings: EngineSettings = TEST_SETTINGS,
    data_dir: str | Path | None = None,
    wrap_store: Callable[[TaskStore], TaskStore] | None = None,
) -> Iterator[SteppedEngine]:
    """`embedded_engine`, on a stepped clock (see `SteppedEngine`)."""
    engine = SteppedEngine(
        executor, data_dir=data_dir, partitions=partitions, settings=settings, wrap_store=wrap_store
    )
    with engine:
        yield engine


class Recorder:
    """An executor that records every call; can fail or block chosen tasks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[TaskKey, int, dict]] = []
        self.fail: Callable[[Task, ExecutionContext], bool] = lambda task, ctx: False
        self.block: Callable[[Task], bool] = lambda task: False
        self.release = threading.Event()
        self.started: dict[TaskKey, threading.Event] = defaultdict(threading.Event)
        self.running = 0
        self.peak = 0

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        with self.lock:
            self.calls.append((task.key, context.attempt, dict(task.data)))
            self.running += 1
            self.peak = max(self.peak, self.running)
        self.started[task.key].set()
        try:
            if self.block(task):
                while not self.release.wait(0.01):
                    context.raise_if_cancelled()
            if self.fail(task, context):
                raise RuntimeError(f"failing {task.uniqueness_key} on attempt {context.attempt}")
        finally:
            with self.lock:
                self.running -= 1

    def keys(self) -> list[TaskKey]:
        with self.lock:
            return [key for key, _, _ in self.calls]

    def runs_of(self, ordering_id: str) -> list[TaskKey]:
        return [key for key in self.keys() if key.ordering_id == ordering_id]


def bare_context(timers: TimerService) -> PartitionContext:
    """Partition 0's context with `timers` and nothing else: for a part tested alone (a
    PartitionScheduler, an actor started by hand), which must not reach the store or pool."""
    return PartitionContext(
        partition=0,
        generation=1,
        store=None,  # type: ignore[arg-type]
        executor=None,  # type: ignore[arg-type]
        executor_service=None,  # type: ignore[arg-type]
        timers=timers,
        settings=TEST_SETTINGS,
        report_failure=lambda *failure: None,
    )
