"""Executors and stores with knobs, for engine tests."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from scheduler.executors.abc import ExecutionContext
from scheduler.model import Task, TaskKey


def soon(ms: int = 0) -> datetime:
    return datetime.now(UTC) + timedelta(milliseconds=ms)


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
