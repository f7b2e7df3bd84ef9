"""A task's attempt history and errors as `scheduler tasks show` and `tasks list` print them."""

from __future__ import annotations

from collections.abc import Sequence

import click

from scheduler.attempts import attempt_dict, error_summary
from scheduler.cli.keys import iso
from scheduler.cli.output import echo_table
from scheduler.model import Attempt

__all__ = ["attempt_dict", "echo_history", "error_summary"]


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
