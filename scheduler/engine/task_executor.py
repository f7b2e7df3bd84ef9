"""TaskExecutor: one attempt of one task, run on the TaskExecutorService.

A plain object rather than the seed's actor per task (a thread per task is too dear). The pool
thread checks the worker's lease once more right before the executor call: an attempt handed
over just before the process was stopped past its lease reports `NOT_STARTED` and is queued
again.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

from scheduler.engine.clock import SYSTEM_CLOCK, Clock
from scheduler.engine.executor_service import TaskExecutorService
from scheduler.engine.lease import ALWAYS_HELD, Lease
from scheduler.engine.messages import AttemptFinished, AttemptStarted, ScheduledTask
from scheduler.engine.timers import TimerHandle, TimerService
from scheduler.errors import TaskRejected, TaskTimeoutError
from scheduler.executors.abc import TIMED_OUT, ExecutionContext, Executor

#: Longest error text kept in a status row; the full traceback goes to the log.
MAX_ERROR_CHARS = 4000

NOT_STARTED = "not started: the worker's lease lapsed before the pool reached it"
"""The `cancelled` reason of an attempt the pool refused to start (see the module): it never
began, and its task goes back to its queue, unchanged."""


class TaskExecutor:
    """Runs one attempt and reports its start and its end through `report` (from a pool thread)."""

    __slots__ = ("clock", "context", "item", "lease", "report", "timer")

    def __init__(
        self,
        item: ScheduledTask,
        *,
        partition: int,
        report: Callable[[AttemptStarted | AttemptFinished], None],
        clock: Clock = SYSTEM_CLOCK,
        lease: Lease = ALWAYS_HELD,
        worker: str | None = None,
    ) -> None:
        self.clock = clock
        self.lease = lease
        self.item = item
        self.context = ExecutionContext(
            item.task, attempt=item.attempts + 1, partition=partition, worker=worker
        )
        self.report = report
        self.timer: TimerHandle | None = None

    def start(
        self,
        executor: Executor,
        service: TaskExecutorService,
        timers: TimerService,
        timeout_s: float | None,
    ) -> None:
        if timeout_s is not None:
            self.timer = timers.call_later(timeout_s, lambda: self.cancel(TIMED_OUT))
        service.submit(lambda: self._run(executor))

    def cancel(self, reason: str) -> None:
        self.context.cancel(reason)

    def _run(self, executor: Executor) -> None:
        context = self.context
        error: str | None = None
        reason: str | None = None
        permanent = timed_out = False
        started_ms: int | None = None
        try:
            if context.is_cancelled:
                pass
            elif not self.lease.held():
                error = reason = NOT_STARTED
            else:
                started_ms = self.clock.now_ms()
                self.report(AttemptStarted(context.key, context.attempt, started_ms))
                executor(context.task, context)
        except BaseException as failure:  # an executor's failure is data here, whatever it is
            error = _describe(failure)
            permanent = isinstance(failure, TaskRejected)
            timed_out = isinstance(failure, TaskTimeoutError)
        finally:
            if self.timer is not None:
                self.timer.cancel()
            if reason is None:
                reason = context.reason
            if reason == TIMED_OUT:
                timed_out = True
                error = f"{TaskTimeoutError.__name__}: attempt ran past its timeout" + (
                    f" ({error})" if error else ""
                )
            elif reason is not None and error is None:
                error = f"cancelled: {reason}"
            self.report(
                AttemptFinished(
                    context.key,
                    context.attempt,
                    error,
                    reason,
                    permanent,
                    started_ms,
                    self.clock.now_ms(),
                    context.exit_code,
                    context.log_path,
                    context.task.data,
                    timed_out,
                )
            )


def _describe(failure: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(failure), failure)).strip()
    return text[:MAX_ERROR_CHARS]
