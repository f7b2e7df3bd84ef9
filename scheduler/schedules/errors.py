"""The errors of the schedules layer, in the product's one exception tree."""

from __future__ import annotations

from scheduler.errors import (
    BackendUnavailableError,
    SchedulerError,
    TaskNotFoundError,
    TaskStateError,
)


class ScheduleError(SchedulerError, ValueError):
    """A schedule (or a part of one) that cannot be accepted; the message names the field."""

    def __init__(self, message: str, fields: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.fields = fields or []
        """Each wrong field's path (`trigger.cronExpression`) and its problem, when known: the
        API answers them as its error's `fields`."""


class CronError(ScheduleError):
    """A cron expression that cannot be read, or a Quartz one that has no exact equivalent."""


class JobStateError(SchedulerError):
    """A pending job was asked to do what its state does not allow (a bug in the caller)."""


class ScheduleNotFoundError(TaskNotFoundError):
    """A schedule name the schedule store does not hold (CLI exit status 4)."""


class ScheduleConflictError(TaskStateError):
    """A lifecycle request that does not apply to the schedule's state: enabling an enabled
    schedule, creating one that exists (CLI exit status 5)."""


class ScheduleNotAppliedError(BackendUnavailableError):
    """A change was sent but no worker applied it in time (is a worker running?)."""
