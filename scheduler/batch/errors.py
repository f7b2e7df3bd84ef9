"""The errors of the batch-jobs layer, in the product's one exception tree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.errors import BackendUnavailableError, SchedulerError, TaskNotFoundError


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a configuration."""

    path: str
    """Where, as a JSON path: ``jobs[1].dependencies[0].name``; empty for the whole file."""
    message: str
    """What is wrong and what to write instead."""
    job: str | None = None
    """The name of the job the problem is in, when it has one."""

    def __str__(self) -> str:
        where = self.path or "the configuration"
        if self.job is not None:
            where += f" (job {self.job!r})"
        return f"{where}: {self.message}"


class BatchConfigError(SchedulerError, ValueError):
    """A batch configuration that cannot be accepted; `problems` lists every reason at once."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = "\n  ".join(str(problem) for problem in self.problems)
        super().__init__(
            f"the batch configuration is not valid ({count} problem{'s' * (count != 1)}):\n"
            f"  {lines}"
        )


class PartitionStateError(SchedulerError):
    """A partition was asked to do what its state does not allow (a bug in the caller)."""


class UnknownJobError(TaskNotFoundError):
    """A batch job name that the configuration in force does not have."""


class EmptyRangeError(SchedulerError, ValueError):
    """A partition range whose end is not after its start: it holds no partition."""


class BatchNotAppliedError(BackendUnavailableError):
    """A configuration was sent but no worker applied it in time (CLI exit status 3)."""
