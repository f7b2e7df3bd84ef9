"""A durable, ordered, partitioned task scheduler for data platforms.

    import scheduler
    from scheduler import Task

    with scheduler.connect() as client:  # the deployment the SCHEDULER_* settings describe
        client.schedule_task(Task("user-42", due, "reminder-1", {"user": 42})).result()

The public surface is re-exported here; everything else is an implementation detail.
"""

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
from scheduler.worker import Worker

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "BackendUnavailableError",
    "BulkResult",
    "ConfigurationError",
    "EmbeddedScheduler",
    "EngineSettings",
    "ExecutionContext",
    "Executor",
    "InvalidTaskKeyError",
    "NaiveDatetimeError",
    "PartitionCountMismatchError",
    "RetryPolicy",
    "SchedulerClient",
    "SchedulerError",
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
    "TopicMissingError",
    "TopicReplacedError",
    "UnknownExecutorError",
    "Worker",
    "connect",
]
