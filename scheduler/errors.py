"""One exception tree for the whole product.

Every message names the offending value and says what to do about it, because the person reading
it is usually an operator looking at a log line, not the author of the code that raised it.
"""

from __future__ import annotations


class SchedulerError(Exception):
    """Base class of every error the scheduler raises on purpose."""


class TaskRejected(SchedulerError, ValueError):
    """A task was refused by `schedule_task`; nothing was written."""


class InvalidTaskKeyError(TaskRejected):
    """An ordering id or uniqueness key cannot be used as a key (empty, too long, NUL byte)."""


class NaiveDatetimeError(TaskRejected):
    """A scheduled time without a time zone: the scheduler cannot know which instant is meant."""


class TaskInPastError(TaskRejected):
    """The scheduled time lies further in the past than the grace window allows."""


class TaskDataError(TaskRejected):
    """Task data that is not a JSON-serialisable mapping, or that exceeds the size limit."""


class UnknownExecutorError(TaskRejected):
    """Task data names an executor or job that no one registered."""


class ExecutorUnavailableError(UnknownExecutorError):
    """The executor a task or setting names needs a package this environment lacks (pyspark)."""


class ConfigurationError(SchedulerError):
    """A setting has a bad value, or settings contradict each other."""


class DeploymentFileError(ConfigurationError):
    """A file of the deployment (the programs file, the API's tokens file) does not read: the
    operator's to fix, not the request's (the API answers 503 until it is)."""


class PartitionCountMismatchError(ConfigurationError):
    """The log's partition count differs from the one the stored data was partitioned with."""


class TopicMissingError(ConfigurationError):
    """The log's topic does not exist (never created, or deleted)."""


class TopicReplacedError(ConfigurationError):
    """The topic a worker read was deleted (and perhaps created again) while it ran."""


class StoreReplacedError(ConfigurationError):
    """The task store a worker wrote to was deleted or replaced under it while it ran."""


class BackendUnavailableError(SchedulerError):
    """Kafka, Cassandra or another backend could not be reached."""


def is_refusal(error: BaseException) -> bool:
    """Whether a backend's error is a refusal, which the partition waits out, rather than a bug:
    the backend unavailable, or refusing what its configuration forbids (a permission revoked,
    a table dropped), which an operator fixes while the partition holds what it read."""
    return isinstance(error, BackendUnavailableError | ConfigurationError)


class TaskNotFoundError(SchedulerError, LookupError):
    """An admin operation named a task the store does not hold; its subclasses, another thing
    a command names (a schedule, a run, a batch job): the CLI's exit status 4, the API's 404."""


class TaskStateError(SchedulerError):
    """An admin operation does not apply to the task's state (retrying a task that did not fail)."""


class TaskCancelledError(SchedulerError):
    """Raised inside an executor call when its task was cancelled (revocation, timeout, admin)."""


class TaskTimeoutError(SchedulerError):
    """A task ran past its per-task timeout."""


class UnknownProgramError(TaskRejected, LookupError):
    """A program name that no programs file or registration declares."""


class RunNotFoundError(TaskNotFoundError):
    """A run id the run store does not hold (never made, or expired)."""


class AmbiguousRunIdError(SchedulerError, ValueError):
    """The start of a run id that more than one of the newest runs has."""


class SparkTaskError(SchedulerError):
    """A Spark task of a job raised in Python; the message starts with that exception's line,
    then Spark's own report (the whole traceback) follows."""
