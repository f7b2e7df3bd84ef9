"""`scheduler tasks retry|drop|rerun|cancel`: operator changes, checked against the store first.

The change itself is a message on the log (the client's `retry_task`, `drop_task`,
`rerun_task`, `cancel_task`), applied by the worker that owns the task's partition in order
with its tasks. The check and the sending are `scheduler.admin`'s, which the REST API uses too.
Retry, drop and rerun also take filter options instead of keys (`scheduler.cli.tasks_bulk`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from scheduler.admin import check_changes, describe_key, partition_of, request_changes
from scheduler.bulk import BulkOperation
from scheduler.cli.context import CliState, backends, pass_state
from scheduler.cli.keys import parse_keys
from scheduler.cli.tasks_bulk import filter_options, refuse_mixed, run_bulk

ACK_TIMEOUT_S = 60.0

_KEYS = click.argument("keys", nargs=-1, required=True, metavar="KEY...")
_KEYS_OR_FILTER = click.argument("keys", nargs=-1, required=False, metavar="[KEY]...")
_FILTERS = """
    Or select the tasks with filter options instead of keys (every task that matches all of
    them; --dry-run first shows how many and which): the store is read a page at a time, so
    a filter may select millions.
    """


@click.command()
@_KEYS_OR_FILTER
@filter_options(BulkOperation.RETRY)
@pass_state
def retry(
    state: CliState, keys: Sequence[str], dry_run: bool, as_json: bool, **filters: Any
) -> None:
    """Run FAILED tasks again from their first attempt, with the data they failed with.

    Give each task as ORDERING_ID/TIME/UNIQUENESS_KEY, as logs print it, or as its three parts
    ORDERING_ID TIME UNIQUENESS_KEY; several tasks one after the other.
    """
    refuse_mixed(keys, filters)
    if not keys:
        run_bulk(state, BulkOperation.RETRY, filters, dry_run=dry_run, as_json=as_json)
        return
    _change(state, keys, "retry", dry_run=dry_run)


@click.command()
@_KEYS_OR_FILTER
@filter_options(BulkOperation.DROP)
@pass_state
def drop(
    state: CliState, keys: Sequence[str], dry_run: bool, as_json: bool, **filters: Any
) -> None:
    """Forget FAILED tasks: their status rows are deleted and they never run again.

    Give each task as ORDERING_ID/TIME/UNIQUENESS_KEY, as logs print it, or as its three parts
    ORDERING_ID TIME UNIQUENESS_KEY; several tasks one after the other.
    """
    refuse_mixed(keys, filters)
    if not keys:
        run_bulk(state, BulkOperation.DROP, filters, dry_run=dry_run, as_json=as_json)
        return
    _change(state, keys, "drop", dry_run=dry_run)


@click.command()
@_KEYS_OR_FILTER
@click.option(
    "--data",
    "data_text",
    metavar="JSON",
    help="Run with this data (a JSON object) instead of the data the task's status kept.",
)
@filter_options(BulkOperation.RERUN)
@pass_state
def rerun(
    state: CliState,
    keys: Sequence[str],
    data_text: str | None,
    dry_run: bool,
    as_json: bool,
    **filters: Any,
) -> None:
    """Run finished tasks (succeeded, failed or cancelled) once more, from their first attempt.

    Each runs in its own place in its ordering id's key order: before the later tasks of its
    ordering id that have not started yet. Give each task as ORDERING_ID/TIME/UNIQUENESS_KEY,
    as logs print it, or as its three parts ORDERING_ID TIME UNIQUENESS_KEY; several tasks one
    after the other.
    """
    refuse_mixed(keys, filters)
    data = _data(data_text)
    if not keys:
        run_bulk(state, BulkOperation.RERUN, filters, dry_run=dry_run, as_json=as_json, data=data)
        return
    _change(state, keys, "rerun", dry_run=dry_run, data=data)


for _command in (retry, drop, rerun):
    _command.help = (_command.help or "") + _FILTERS


def _data(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise click.BadParameter(f"{text!r} is not JSON: {error}", param_hint="--data") from None
    if not isinstance(data, dict):
        raise click.BadParameter(
            f"{text!r} is a {type(data).__name__}; give a JSON object such as '{{\"job\": 1}}'",
            param_hint="--data",
        )
    return data


@click.command()
@_KEYS
@pass_state
def cancel(state: CliState, keys: Sequence[str]) -> None:
    """Cancel tasks that are pending, running or waiting to be retried; they become CANCELLED.

    A running attempt is stopped: the command executor's process group gets SIGTERM (SIGKILL 5 s
    later), the Spark executor's job group is cancelled.

    Give each task as ORDERING_ID/TIME/UNIQUENESS_KEY, as logs print it, or as its three parts
    ORDERING_ID TIME UNIQUENESS_KEY; several tasks one after the other.
    """
    _change(state, keys, "cancel")


def _change(
    state: CliState,
    parts: Sequence[str],
    verb: str,
    *,
    dry_run: bool = False,
    data: dict[str, Any] | None = None,
) -> None:
    from scheduler.client import SchedulerClient

    settings = state.settings()
    keys = parse_keys(parts, "KEY")
    with backends(settings) as (log, store):
        check_changes(store, settings.partitions, keys, verb)
        if dry_run:
            for key in keys:
                partition = partition_of(key.ordering_id, settings.partitions)
                click.echo(f"would {verb} {describe_key(key)} (partition {partition})")
            return
        client = SchedulerClient(log=log)
        try:
            request_changes(client, keys, verb, data=data, timeout=ACK_TIMEOUT_S)
        finally:
            client.close()
    for key in keys:
        partition = partition_of(key.ordering_id, settings.partitions)
        click.echo(f"{verb} requested for {describe_key(key)} (partition {partition})")
