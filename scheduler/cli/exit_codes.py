"""The exit status of every `scheduler` command, in one table: scripts branch on it.

A `SchedulerError` becomes one red line on stderr and the status of the first row of `CODES`
whose exception it is (the table runs from the most specific to the most general); anything
else is a bug and keeps its traceback (Python's status 1).
"""

from __future__ import annotations

from typing import NamedTuple

from scheduler.errors import (
    BackendUnavailableError,
    SchedulerError,
    TaskNotFoundError,
    TaskStateError,
)

OK = 0
USAGE = 2
"""A bad option, argument, setting or request (click's own status for usage errors)."""
BACKEND_UNAVAILABLE = 3
"""Kafka, Cassandra or a file the backend needs could not be reached: try again later."""
NOT_FOUND = 4
"""The task (schedule, run, program, batch job) the command names does not exist. A topic,
keyspace or data directory that does not exist is a setting naming the wrong thing: status 2,
like any other bad setting."""
CONFLICT = 5
"""The request does not apply to the state it found (retrying a task that did not fail)."""
INTERRUPTED = 130
"""Ctrl-C (SIGINT) before the command finished, as shells report it (128 + 2)."""


class ExitCode(NamedTuple):
    """One row of the table."""

    error: type[SchedulerError]
    """The exceptions (with their subclasses) that end a command with `code`."""
    code: int
    """The exit status."""


CODES: tuple[ExitCode, ...] = (
    ExitCode(TaskNotFoundError, NOT_FOUND),
    ExitCode(TaskStateError, CONFLICT),
    ExitCode(BackendUnavailableError, BACKEND_UNAVAILABLE),
    ExitCode(SchedulerError, USAGE),
)


def exit_code(error: SchedulerError) -> int:
    """The status a command that failed with `error` exits with."""
    return next(row.code for row in CODES if isinstance(error, row.error))


EPILOG = f"""\b
Exit status:
  {OK}    success
  1    a bug (the traceback says where)
  {USAGE}    bad option, argument, setting or request
  {BACKEND_UNAVAILABLE}    a backend (Kafka, Cassandra) is unavailable: try again later
  {NOT_FOUND}    not found: the task, schedule, run, program or job named does not exist
  {CONFLICT}    conflict: the task is not in a state the request applies to
  {INTERRUPTED}  interrupted by Ctrl-C"""
"""The table as `scheduler --help` shows it."""
