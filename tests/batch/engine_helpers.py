"""An embedded engine with programs and batch jobs, and a clock the batch decisions read."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from scheduler.batch.api import BatchJobs
from scheduler.batch.launching import control_task
from scheduler.batch.runtime import BatchRuntime, embedded_batch
from scheduler.batch.state import JobState
from scheduler.engine.clock import now_ms
from scheduler.executors.abc import Executor
from scheduler.executors.command import CommandExecutor
from scheduler.executors.registry import RoutingExecutor
from scheduler.programs.abc import RunStore
from scheduler.programs.catalog import ProgramCatalog
from scheduler.programs.runtime import embedded_programs
from scheduler.testing import TEST_SETTINGS, TestEngine
from tests.batch.helpers import P

PY = sys.executable
T = TypeVar("T")


class Clock:
    """What the batch decisions read as now: set by the test, never by the wall."""

    def __init__(self, at: str) -> None:
        self.ms = P(at)

    def __call__(self) -> int:
        return self.ms

    def set(self, at: str) -> None:
        self.ms = P(at)


@dataclass
class Batch:
    engine: TestEngine
    runtime: BatchRuntime
    runs: RunStore
    jobs: BatchJobs
    clock: Clock

    def load(self, config: dict[str, Any]) -> None:
        self.jobs.load(json.dumps(config))

    def send(self, op: str, **data: Any) -> None:
        task = control_task("default", op, now_ms(), f"{time.time_ns():020d}:{op}", **data)
        self.engine.client.schedule_task(task).result(10)

    def states(self) -> dict[str, JobState]:
        return self.runtime.store.states()

    def settle(self, check: Callable[[], T], timeout: float = 30.0) -> T:
        """Wait until `check` is truthy and the engine is idle (runs end on their own threads:
        their events come back through the subscriber)."""
        deadline = time.monotonic() + timeout
        while True:
            self.engine.join(timeout, include_future=False)
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError("the batch jobs did not get there in time")
            time.sleep(0.05)


@contextmanager
def batch_engine(
    tmp_path: Path,
    *,
    at: str = "2000-01-02 00:00:00",
    file: Path | None = None,
    wall_clock: bool = False,
) -> Iterator[Batch]:
    routes: dict[str, Executor] = {"command": CommandExecutor(log_dir=str(tmp_path / "logs"))}
    router = RoutingExecutor(routes, default="command")
    engine = TestEngine(router, data_dir=tmp_path / "data", partitions=4, settings=TEST_SETTINGS)
    programs = embedded_programs(engine, router, ProgramCatalog())
    clock = Clock(at)
    runtime = embedded_batch(
        engine, router, programs, file=file, clock=now_ms if wall_clock else clock
    )
    with ExitStack() as stack:
        stack.callback(runtime.close)
        stack.callback(programs.close)  # if the engine does not start
        stack.enter_context(engine)
        stack.callback(programs.close)  # before the engine stops and closes the log
        assert programs.subscriber is not None
        programs.subscriber.start()
        jobs = BatchJobs(store=runtime.store, client=engine.client, clock=clock)
        yield Batch(engine, runtime, programs.runs, jobs, clock)
