"""One attempt's outcome when a cancel reaches it. A callable that returns after a stop's or a
revocation's cancel may have given up early: its attempt is interrupted and runs again
(at-least-once). Returning is a success only when nothing cancelled the attempt."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from scheduler.engine.messages import AttemptFinished, AttemptStarted, ScheduledTask
from scheduler.engine.task_executor import TaskExecutor
from scheduler.executors.abc import CANCELLED_BY_OPERATOR, TIMED_OUT, ExecutionContext
from scheduler.model import Task


class InlinePool:
    """Runs a submitted attempt on the calling thread."""

    def submit(self, call: Callable[[], None]) -> None:
        call()


def finish_of(executor: Callable[[Task, ExecutionContext], None]) -> AttemptFinished:
    reports: list[AttemptStarted | AttemptFinished] = []
    item = ScheduledTask(Task("account-1", datetime.now(UTC), "t"), 0, None, 0)
    attempt = TaskExecutor(item, partition=0, report=reports.append)
    attempt.start(executor, InlinePool(), None, None)  # type: ignore[arg-type]
    started, finished = reports
    assert isinstance(started, AttemptStarted) and isinstance(finished, AttemptFinished)
    return finished


def test_a_return_with_nothing_cancelled_is_a_success():
    finished = finish_of(lambda task, context: None)
    assert (finished.error, finished.cancelled) == (None, None)


@pytest.mark.parametrize("reason", ["partition revoked", CANCELLED_BY_OPERATOR, TIMED_OUT])
def test_a_return_after_a_cancel_is_the_cancel(reason: str):
    def returns_anyway(task: Task, context: ExecutionContext) -> None:
        context.cancel(reason)

    finished = finish_of(returns_anyway)
    assert finished.cancelled == reason
    assert finished.error is not None and not finished.permanent
