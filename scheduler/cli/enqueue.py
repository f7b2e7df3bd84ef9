"""`scheduler enqueue`: schedule one task from the shell, through the same client producers use."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from scheduler.cli.context import CliState, pass_state
from scheduler.cli.keys import describe_key, due_in, parse_time, partition_of
from scheduler.errors import TaskDataError

if TYPE_CHECKING:
    from scheduler.client import SchedulerClient
    from scheduler.model import Task
    from scheduler.settings import Settings

ACK_TIMEOUT_S = 60.0
"""How long to wait for the log to make the task durable before giving up."""


@click.command()
@click.argument("ordering_id")
@click.option(
    "--at",
    "at",
    metavar="TIME",
    help="When to run, ISO 8601 with a time zone: 2027-01-31T14:00:00Z or "
    "2027-01-31T15:00:00+01:00 (or epoch milliseconds).",
)
@click.option(
    "--in", "delay", metavar="DURATION", help="When to run, from now: 30s, 5m, 1h30m, 2d."
)
@click.option(
    "--key",
    "uniqueness_key",
    metavar="UNIQUENESS_KEY",
    help="Tells tasks of one ordering id at the same time apart (default: a random UUID). "
    "Enqueuing a pending key again replaces its data.",
)
@click.option("--data", "data_json", metavar="JSON", help="Task data, a JSON object.")
@click.option(
    "--data-file",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
    help="Read the task data (a JSON object) from this file; - for stdin.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the task as JSON.")
@pass_state
def enqueue(
    state: CliState,
    ordering_id: str,
    at: str | None,
    delay: str | None,
    uniqueness_key: str | None,
    data_json: str | None,
    data_file: Path | None,
    as_json: bool,
) -> None:
    """Schedule a task for ORDERING_ID, due now or at --at / --in.

    Tasks of one ordering id run one at a time, in time order. The task is durable when this
    command returns; it prints the task's key (ordering id, time, uniqueness key) and partition,
    the values `scheduler tasks show` takes. Without --at or --in the task is due now.

    With the default executor (`auto`) the data says what runs: "job" names a PySpark job
    (`package.module:function` under SCHEDULER_SPARK_JOB_MODULES), "executor" another executor
    (`command` runs "argv"); a task with no data runs nothing and succeeds.

    \b
    Examples:
      scheduler enqueue orders-42
      scheduler enqueue orders-42 --at 2027-01-31T14:00:00Z --key daily-2027-01-31
      scheduler enqueue orders-42 --in 5m --data '{"executor": "command", "argv": ["echo", "hi"]}'
    """
    from scheduler.model import Task

    when = _due_time(at, delay)
    data = _data(data_json, data_file)
    settings = state.settings()
    task = Task(ordering_id, when, uniqueness_key or str(uuid.uuid4()), data)
    validate = executor_check(state, settings)
    if validate is not None:
        validate(task)  # refused before connecting: a task its executor refuses needs no Kafka
    with connected_client(settings, validate) as (client, partitions):
        client.schedule_task(task).result(timeout=ACK_TIMEOUT_S)
    partition = partition_of(ordering_id, partitions)
    if as_json:
        from scheduler.cli.keys import iso
        from scheduler.cli.output import echo_json

        echo_json(
            {
                "key": str(task.key),
                "ordering_id": task.ordering_id,
                "scheduled_time": iso(task.scheduled_ms),
                "uniqueness_key": task.uniqueness_key,
                "partition": partition,
            }
        )
    else:
        click.echo(f"enqueued {describe_key(task.key)} (partition {partition})")


def executor_check(state: CliState, settings: Settings) -> Callable[[Task], None] | None:
    """The configured executor's check of a task, the one `scheduler.connect()` applies too
    (`runtime.task_check`); what it refuses names where the executor was set."""
    from scheduler.runtime import task_check

    where = state.origin("executor")
    return task_check(settings, set_by=None if where == "executor" else where)


@contextmanager
def connected_client(
    settings: Settings, validate: Callable[[Task], None] | None
) -> Iterator[tuple[SchedulerClient, int]]:
    """A client on the configured log, whose topic has the configured partition count (created if
    missing), and that count; closed with its log after."""
    from scheduler.runtime import connect

    with connect(settings, validate=validate) as client:
        yield client, settings.partitions


def _due_time(at: str | None, delay: str | None) -> datetime:
    if at is not None and delay is not None:
        raise click.UsageError("give --at or --in, not both")
    if at is not None:
        return parse_time(at, "--at")
    now = datetime.now(UTC)
    return due_in(delay, "--in", now) if delay is not None else now


def _data(data_json: str | None, data_file: Path | None) -> dict[str, Any]:
    if data_json is not None and data_file is not None:
        raise click.UsageError("give --data or --data-file, not both")
    if data_file is not None:
        source = "--data-file"
        stdin = str(data_file) == "-"
        text = sys.stdin.read() if stdin else data_file.read_text(encoding="utf-8")
    elif data_json is not None:
        source, text = "--data", data_json
    else:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TaskDataError(f"{source} is not valid JSON: {error}") from None
    except RecursionError:
        raise TaskDataError(
            f"{source} is nested too deeply to read as JSON; task data must be a JSON object "
            "of ordinary depth"
        ) from None
    if not isinstance(data, dict):
        raise TaskDataError(
            f'{source} must be a JSON object such as {{"job": "..."}}, got {type(data).__name__}'
        )
    return data
