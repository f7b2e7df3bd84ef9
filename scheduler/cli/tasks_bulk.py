"""`scheduler tasks retry|drop|rerun` by filter: the options that select tasks instead of keys.

The selection is read from the store a page at a time and each task found gets the same record
on the log as a single key would (`scheduler.bulk`); `--dry-run` reads the same pages and sends
nothing, so an operator sees how many tasks a filter selects, and which, before changing them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import click

from scheduler.bulk import SAMPLE_SIZE, BulkOperation, BulkResult, TaskFilter
from scheduler.cli.context import CliState, backends, echo_err
from scheduler.cli.keys import check_partition, describe_key, parse_time
from scheduler.cli.output import echo_json
from scheduler.model import TaskState

FILTER_OPTIONS = ("ordering_id", "states", "scheduled_from", "scheduled_before", "partition")
"""The parameters `filter_options` adds, besides `dry_run` and `as_json`."""


def filter_options(operation: BulkOperation) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The filter options, `--dry-run` and `--json` of one operation's command."""
    states = sorted(state.value for state in operation.states)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option(
                "--ordering-id", help="Select the tasks of this ordering id (instead of keys)."
            ),
            click.option(
                "--state",
                "states",
                multiple=True,
                type=click.Choice(states, case_sensitive=False),
                help="Select tasks in this state; repeat for several "
                f"(default: {', '.join(states)}).",
            ),
            click.option(
                "--from",
                "scheduled_from",
                metavar="TIME",
                help="Select tasks scheduled at or after TIME (ISO 8601 with a zone, or epoch ms).",
            ),
            click.option(
                "--until",
                "scheduled_before",
                metavar="TIME",
                help="Select tasks scheduled before TIME.",
            ),
            click.option(
                "--partition",
                type=click.IntRange(min=0),
                help="Select the tasks of this partition.",
            ),
            click.option(
                "--dry-run",
                is_flag=True,
                help="Change nothing; say how many tasks would be changed, and the first of them.",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON."),
        ]
        return functools.reduce(lambda wrapped, option: option(wrapped), reversed(options), command)

    return decorate


def selected(values: dict[str, Any]) -> bool:
    """Whether any filter option was given."""
    return any(values[name] not in (None, ()) for name in FILTER_OPTIONS)


def run_bulk(
    state: CliState,
    operation: BulkOperation,
    values: dict[str, Any],
    *,
    dry_run: bool,
    as_json: bool,
    data: dict[str, Any] | None = None,
) -> None:
    """Apply `operation` to every task the filter options in `values` select, and say what
    was (or, with `--dry-run`, would be) touched; a rerun with `data` if given."""
    from scheduler.client import SchedulerClient

    settings = state.settings()
    check_partition(values["partition"], settings.partitions, "--partition")
    where = TaskFilter(
        ordering_id=values["ordering_id"],
        states=frozenset(TaskState(value.lower()) for value in values["states"]) or None,
        scheduled_from=_time(values["scheduled_from"], "--from"),
        scheduled_before=_time(values["scheduled_before"], "--until"),
        partition=values["partition"],
    )
    start, end = where.scheduled_from, where.scheduled_before
    if start is not None and end is not None and start >= end:
        raise click.BadParameter(
            f"{values['scheduled_before']!r} is not after --from {values['scheduled_from']!r}: "
            "the range [--from, --until) would select nothing",
            param_hint="--until",
        )
    with backends(settings) as (log, store):
        client = SchedulerClient(log=log, store=store, max_data_bytes=settings.max_data_bytes)
        try:
            result: BulkResult
            if operation is BulkOperation.RERUN:
                result = client.rerun_tasks(where, data=data, dry_run=dry_run)
            else:
                result = getattr(client, f"{operation.value}_tasks")(where, dry_run=dry_run)
        finally:
            client.close()
    _report(result, as_json)


def _time(value: str | None, option: str) -> datetime | None:
    return None if value is None else parse_time(value, option)


def _report(result: BulkResult, as_json: bool) -> None:
    verb = result.operation.value
    if as_json:
        echo_json(
            {
                "operation": verb,
                "dry_run": result.dry_run,
                "count": result.count,
                "first": [
                    {"partition": partition, "key": describe_key(key)}
                    for partition, key in result.sample
                ],
            }
        )
        return
    if result.count == 0:
        *others, last = sorted(state.value for state in result.operation.states)
        takes = f"{', '.join(others)} or {last}" if others else last
        echo_err(
            f"no tasks match: nothing to {verb} ({verb} takes {takes} tasks; `scheduler tasks "
            "list` shows the tasks' states)"
        )
        return
    tasks = f"{result.count:,} task{'' if result.count == 1 else 's'}"
    if result.dry_run:
        click.echo(f"would {verb} {tasks} (dry run: nothing was changed)")
    else:
        click.echo(f"{verb} requested for {tasks}")
    for partition, key in result.sample:
        click.echo(f"  {describe_key(key)} (partition {partition})")
    if result.count > len(result.sample):
        click.echo(f"  ... and {result.count - len(result.sample):,} more")


def refuse_mixed(keys: Sequence[str], values: dict[str, Any]) -> None:
    """Keys and filter options are two ways to name tasks: one at a time."""
    if keys and selected(values):
        raise click.UsageError(
            "give the tasks as keys or select them with filter options, not both"
        )
    if not keys and not selected(values):
        raise click.UsageError(
            "give each task as ORDERING_ID/TIME/UNIQUENESS_KEY (or its three parts ORDERING_ID "
            "TIME UNIQUENESS_KEY), or select tasks with "
            "--ordering-id, --state, --from, --until or --partition (add --dry-run to see what "
            f"a filter selects; the first {SAMPLE_SIZE} are shown)"
        )
