"""A task's attempt history and errors as `scheduler tasks show` and `tasks list` print them."""

from __future__ import annotations

import re
from collections.abc import Sequence

import click

from scheduler.cli.keys import iso
from scheduler.cli.output import echo_table
from scheduler.key_format import TIME_PATTERN
from scheduler.model import Attempt

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


def echo_history(attempts: Sequence[Attempt]) -> None:
    """The attempts as a table, then each attempt's error in full."""
    click.echo("")
    if not attempts:
        click.echo("no attempt recorded (the task has not started, or its history expired)")
        return
    echo_table(
        ["ATTEMPT", "OUTCOME", "STARTED", "DURATION", "EXIT", "WORKER", "LOG"],
        [
            [
                attempt.number,
                attempt.outcome.value.replace("_", " "),
                iso(attempt.started_ms),
                _duration(attempt),
                attempt.exit_code,
                attempt.worker,
                attempt.log_path,
            ]
            for attempt in attempts
        ],
        max_width=100,
    )
    for attempt in attempts:
        if attempt.error:
            lines = attempt.error.strip().splitlines()
            click.echo(f"attempt {attempt.number} error: {lines[0]}")
            for line in lines[1:]:
                click.echo(f"    {line}")


def _duration(attempt: Attempt) -> str | None:
    took = attempt.duration_ms
    if took is None:
        return "running" if attempt.ended_ms is None else None
    if took < 60_000:
        return f"{took / 1000:.3f} s"
    minutes, ms = divmod(took, 60_000)
    hours, minutes = divmod(minutes, 60)
    seconds = ms // 1000
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"
