"""A durable, ordered, partitioned task scheduler for data platforms.

A producer schedules tasks for the workers of the deployment the `SCHEDULER_*` settings
describe::

    from datetime import UTC, datetime, timedelta

    import scheduler
    from scheduler import Task

    due = datetime.now(UTC) + timedelta(minutes=5)
    remind = {"executor": "command", "argv": ["echo", "remind user 42"]}  # what workers run
    with scheduler.connect() as client:
        client.schedule_task(Task("user-42", due, "reminder-1", remind)).result()

`scheduler.connect_schedules()` is the same for schedules (docs/schedules.md).

The public surface is re-exported here; everything else is an implementation detail. Names are
imported on first use, so that `scheduler --help` (and a Ctrl-C while it starts) costs only the
command line's own imports.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.bulk import BulkResult, TaskFilter
    from scheduler.client import SchedulerClient
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.engine.settings import EngineSettings, RetryPolicy
    from scheduler.errors import (
        BackendUnavailableError,
        ConfigurationError,
        InvalidTaskKeyError,
        NaiveDatetimeError,
        PartitionCountMismatchError,
        SchedulerError,
        StoreReplacedError,
        TaskCancelledError,
        TaskDataError,
        TaskInPastError,
        TaskRejected,
        TaskTimeoutError,
        TopicMissingError,
        TopicReplacedError,
        UnknownExecutorError,
    )
    from scheduler.executors.abc import ExecutionContext, Executor
    from scheduler.model import Attempt, AttemptOutcome, Task, TaskKey, TaskState, TaskStatus
    from scheduler.runtime import connect
    from scheduler.schedules.client import SchedulesClient
    from scheduler.schedules.errors import (
        ScheduleConflictError,
        ScheduleError,
        ScheduleNotFoundError,
    )
    from scheduler.schedules.model import (
        And,
        CatchUp,
        Concurrency,
        Delay,
        LastRun,
        Or,
        Partition,
        ProgramStatus,
        Schedule,
        Time,
        TimeRange,
    )
    from scheduler.schedules.runtime import connect_schedules
    from scheduler.worker import Worker

_HOMES = {
    "scheduler.bulk": ["BulkResult", "TaskFilter"],
    "scheduler.client": ["SchedulerClient"],
    "scheduler.embedded": ["EmbeddedScheduler"],
    "scheduler.engine.settings": ["EngineSettings", "RetryPolicy"],
    "scheduler.errors": [
        "BackendUnavailableError",
        "ConfigurationError",
        "InvalidTaskKeyError",
        "NaiveDatetimeError",
        "PartitionCountMismatchError",
        "SchedulerError",
        "StoreReplacedError",
        "TaskCancelledError",
        "TaskDataError",
        "TaskInPastError",
        "TaskRejected",
        "TaskTimeoutError",
        "TopicMissingError",
        "TopicReplacedError",
        "UnknownExecutorError",
    ],
    "scheduler.executors.abc": ["ExecutionContext", "Executor"],
    "scheduler.model": ["Attempt", "AttemptOutcome", "Task", "TaskKey", "TaskState", "TaskStatus"],
    "scheduler.runtime": ["connect"],
    "scheduler.schedules.client": ["SchedulesClient"],
    "scheduler.schedules.runtime": ["connect_schedules"],
    "scheduler.schedules.errors": [
        "ScheduleConflictError",
        "ScheduleError",
        "ScheduleNotFoundError",
    ],
    "scheduler.schedules.model": [
        "And",
        "CatchUp",
        "Concurrency",
        "Delay",
        "LastRun",
        "Or",
        "Partition",
        "ProgramStatus",
        "Schedule",
        "Time",
        "TimeRange",
    ],
    "scheduler.worker": ["Worker"],
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "And",
    "Attempt",
    "AttemptOutcome",
    "BackendUnavailableError",
    "BulkResult",
    "CatchUp",
    "Concurrency",
    "ConfigurationError",
    "Delay",
    "EmbeddedScheduler",
    "EngineSettings",
    "ExecutionContext",
    "Executor",
    "InvalidTaskKeyError",
    "LastRun",
    "NaiveDatetimeError",
    "Or",
    "Partition",
    "PartitionCountMismatchError",
    "ProgramStatus",
    "RetryPolicy",
    "Schedule",
    "ScheduleConflictError",
    "ScheduleError",
    "ScheduleNotFoundError",
    "SchedulerClient",
    "SchedulerError",
    "SchedulesClient",
    "StoreReplacedError",
    "Task",
    "TaskCancelledError",
    "TaskDataError",
    "TaskFilter",
    "TaskInPastError",
    "TaskKey",
    "TaskRejected",
    "TaskState",
    "TaskStatus",
    "TaskTimeoutError",
    "Time",
    "TimeRange",
    "TopicMissingError",
    "TopicReplacedError",
    "UnknownExecutorError",
    "Worker",
    "connect",
    "connect_schedules",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module 'scheduler' has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")  # `scheduler.runtime`, as before
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once imported, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
