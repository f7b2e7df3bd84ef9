"""The errors of the schedules layer, in the product's one exception tree."""

from __future__ import annotations

from scheduler.errors import SchedulerError


class ScheduleError(SchedulerError, ValueError):
    """A schedule (or a part of one) that cannot be accepted; the message names the field."""


class CronError(ScheduleError):
    """A cron expression that cannot be read, or a Quartz one that has no exact equivalent."""


class JobStateError(SchedulerError):
    """A pending job was asked to do what its state does not allow (a bug in the caller)."""
