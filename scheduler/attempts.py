"""A task's attempts and their errors as the CLI and the API show them (`scheduler tasks show`,
`GET /tasks/{key}`): one place, so that both print an attempt the same way."""

from __future__ import annotations

import re

from scheduler.admin import iso
from scheduler.key_format import TIME_PATTERN
from scheduler.model import Attempt

__all__ = ["attempt_dict", "error_summary"]

# `module.path.ErrorClass: message`, as the engine describes an executor's exception. A class
# name starts upper-case, which tells it from the engine's own `cancelled: reason`.
_EXCEPTION = re.compile(r"((?:[A-Za-z_]\w*\.)*([A-Z]\w*)): (.*)", re.DOTALL)
_TASK_PREFIX = re.compile(rf"task \S+/(?:{TIME_PATTERN})/\S+: ")


def error_summary(error: str | None) -> str | None:
    """The useful part of an attempt's error first, on one line: the message's first line
    without the `task <key>: ` the executors put before it, then the exception's class.

    `scheduler.executors.command.CommandFailedError: task o/1/u: /bin/x exited with code 3;
    stderr in /l/e.err:\\n<tail>` becomes `/bin/x exited with code 3; stderr in /l/e.err
    (CommandFailedError)`."""
    if not error:
        return error
    text, kind = error.strip(), None
    match = _EXCEPTION.fullmatch(text)
    if match is not None:
        kind, text = match.group(2), match.group(3)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    first = _TASK_PREFIX.sub("", first, count=1).rstrip(":")
    if kind is None:
        return first
    return f"{first} ({kind})" if first else kind


def attempt_dict(attempt: Attempt) -> dict[str, object]:
    """One attempt as a JSON object (`tasks show --json`)."""
    took = attempt.duration_ms
    return {
        "attempt": attempt.number,
        "outcome": attempt.outcome.value,
        "started_time": iso(attempt.started_ms) if attempt.started_ms is not None else None,
        "started_ms": attempt.started_ms,
        "ended_time": iso(attempt.ended_ms) if attempt.ended_ms is not None else None,
        "ended_ms": attempt.ended_ms,
        "duration_s": None if took is None else took / 1000,
        "exit_code": attempt.exit_code,
        "error": attempt.error,
        "worker": attempt.worker,
        "log_path": attempt.log_path,
    }
