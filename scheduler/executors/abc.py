"""The executor port: what runs one task.

An executor is any callable `executor(task, context)`. It returns normally on success and raises
on failure; the engine retries failures with backoff up to the attempt limit. Delivery is
at-least-once, so an executor should make its effects idempotent, keyed by `context.key`.

Calls run on the worker's bounded pool (the TaskExecutorService), several at once, so an executor
must be thread-safe. It must also honour cancellation: when a partition is revoked, a per-task
timeout fires or an operator cancels, the engine sets `context.cancelled` and runs the callbacks
registered with `context.on_cancel` (the Spark executor cancels its job group there).

What an attempt did for the operator's history goes on the context too: an executor that runs a
process sets `context.exit_code`, one that writes output to a file sets `context.log_path`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from scheduler.errors import TaskCancelledError
from scheduler.model import Task, TaskKey

CANCELLED_BY_OPERATOR = "cancelled by an operator"
"""`ExecutionContext.reason` when an operator cancelled the task (`cancel_task`)."""
TIMED_OUT = "timeout"
"""`ExecutionContext.reason` when the attempt ran past its per-task timeout. Any other reason
(the partition revoked, the worker shutting down) means the task runs again elsewhere."""


class ExecutionContext:
    """What an executor knows about the attempt it is running."""

    __slots__ = (
        "_callbacks",
        "_event",
        "_lock",
        "attempt",
        "exit_code",
        "log_path",
        "partition",
        "reason",
        "task",
        "worker",
    )

    def __init__(
        self, task: Task, *, attempt: int, partition: int, worker: str | None = None
    ) -> None:
        self.task = task
        """The task being run."""
        self.attempt = attempt
        """1 for the first attempt, 2 for the first retry, and so on."""
        self.partition = partition
        """The log partition the task belongs to."""
        self.worker = worker
        """The id of the worker process running it (its `client_id`), when the engine runs it."""
        self.reason: str | None = None
        """Why the attempt was cancelled, once it was."""
        self.exit_code: int | None = None
        """Set by an executor that ran a process (the command executor): its exit code, kept in
        the attempt's record (`scheduler tasks show`)."""
        self.log_path: str | None = None
        """Set by an executor that writes the attempt's output to a file: where, kept in the
        attempt's record. Set it before the output is complete, so a failure still names it."""
        # The event is built only if an executor asks for it: a short task never does, and one
        # Event (a Condition and a lock) per attempt was a tenth of the engine's time per task.
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> threading.Event:
        """Set when the attempt must stop; long-running executors should check or wait on it."""
        with self._lock:
            if self._event is None:
                self._event = threading.Event()
                if self.reason is not None:
                    self._event.set()
            return self._event

    @property
    def is_cancelled(self) -> bool:
        """Whether the attempt was cancelled (cheaper than `cancelled.is_set()`)."""
        return self.reason is not None

    @property
    def key(self) -> TaskKey:
        return self.task.key

    @property
    def data(self) -> Mapping[str, Any]:
        return self.task.data

    @property
    def logical_time(self) -> datetime:
        """The time the task was scheduled for (not when it started): use it for partitioning."""
        return self.task.scheduled_time

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the attempt is cancelled (at once if it already was)."""
        with self._lock:
            if self.reason is None:
                self._callbacks.append(callback)
                return
        callback()

    def cancel(self, reason: str) -> None:
        """Cancel the attempt (called by the engine)."""
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def raise_if_cancelled(self) -> None:
        if self.reason is not None:
            raise TaskCancelledError(f"task {self.key} was cancelled: {self.reason}")


class Executor(Protocol):
    """Runs one attempt of a task; raises to fail it."""

    def __call__(self, task: Task, context: ExecutionContext) -> None: ...


def noop_executor(task: Task, context: ExecutionContext) -> None:
    """Does nothing; for benchmarks and smoke tests."""
