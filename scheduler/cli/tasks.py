"""`scheduler tasks`: look at tasks in the store, and retry, drop or cancel them.

Reads go to the store directly (any process may read). Changes travel on the log like tasks do
(see `scheduler.codec`), because the worker owning a partition is the single writer of its rows;
the commands here only check first that the change makes sense, so that a typo in a key or a
task in the wrong state gets a clear refusal instead of a silently ignored message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from scheduler.cli.context import CliState, backends, echo_err, pass_state
from scheduler.cli.keys import (
    check_partition,
    find_task,
    iso,
    parse_keys,
    partition_of,
    status_dict,
)
from scheduler.cli.output import echo_json, echo_table
from scheduler.cli.task_history import attempt_dict, echo_history, error_summary
from scheduler.cli.tasks_admin import cancel, drop, rerun, retry
from scheduler.errors import SchedulerError, TaskNotFoundError
from scheduler.model import TaskState

if TYPE_CHECKING:
    from scheduler.logs.abc import TaskLog

STATES = [state.value for state in TaskState]


@click.group()
def tasks() -> None:
    """List and inspect tasks; retry or drop failed ones, rerun finished ones, cancel pending ones.

    A task is named by its key, ORDERING_ID/TIME/UNIQUENESS_KEY as logs print it, or by its
    three parts ORDERING_ID TIME UNIQUENESS_KEY as the first columns of `scheduler tasks list`
    show them; TIME is ISO 8601 with a time zone or epoch milliseconds.
    """


@tasks.command("list")
@click.option("--ordering-id", help="Only tasks of this ordering id (in key order).")
@click.option("--partition", type=click.IntRange(min=0), help="Only tasks of this partition.")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(STATES, case_sensitive=False),
    help="Only tasks in this state; repeat for several.",
)
@click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(min=1), help="At most this many."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@pass_state
def list_tasks(
    state: CliState,
    ordering_id: str | None,
    partition: int | None,
    states: Sequence[str],
    limit: int,
    as_json: bool,
) -> None:
    """Tasks in schedule order: pending, running and retrying ones, and finished ones whose
    status is still retained (FAILED among them).

    Without --ordering-id or --partition, every partition is read.
    """
    if ordering_id is not None and partition is not None:
        raise click.UsageError("give --ordering-id or --partition, not both")
    settings = state.settings()
    check_partition(partition, settings.partitions, "--partition")
    wanted = {TaskState(value.lower()) for value in states} or None
    with backends(settings) as (log, store):
        if ordering_id is not None:
            partitions = [partition_of(ordering_id, settings.partitions)]
        else:
            partitions = [partition] if partition is not None else list(range(settings.partitions))
        views = []
        for number in partitions:
            # One more than shown: whether more match is worth a line, a count of them a scan.
            views += store.list_tasks(
                number, ordering_id=ordering_id, states=wanted, limit=limit + 1
            )
        views.sort(key=lambda view: view.task.key.cursor)
        truncated = len(views) > limit
        views = views[:limit]
        _note_unread(log, settings.group_id, partitions)
    if truncated:
        echo_err(
            f"showing the first {limit} matching tasks in schedule order; more match: raise "
            f"--limit (e.g. --limit {limit * 10}) or narrow with --ordering-id, --partition or "
            "--state"
        )
    if as_json:
        echo_json([status_dict(view) for view in views])
        return
    if not views:
        echo_err("no tasks match")
        return
    echo_table(
        ["ORDERING_ID", "TIME", "UNIQUENESS_KEY", "STATE", "PARTITION", "ATTEMPTS", "LAST_ERROR"],
        [
            [
                view.task.ordering_id,
                iso(view.task.scheduled_ms),
                view.task.uniqueness_key,
                view.state.value,
                view.partition,
                view.status.attempts if view.status else 0,
                error_summary(view.status.last_error) if view.status else None,
            ]
            for view in views
        ],
    )


@tasks.command("show")
@click.argument("key", nargs=-1, required=True, metavar="KEY")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@pass_state
def show(state: CliState, key: Sequence[str], as_json: bool) -> None:
    """Everything the store holds about one task: state, data, last error, and each attempt
    with its start, duration, outcome, exit code, worker, log file and error (kept as long as
    the task's status, `status_retention_s`).

    KEY is ORDERING_ID/TIME/UNIQUENESS_KEY as logs print it, or its three parts ORDERING_ID
    TIME UNIQUENESS_KEY.
    """
    settings = state.settings()
    keys = parse_keys(key, "KEY")
    if len(keys) != 1:
        raise click.BadParameter(
            f"got {len(keys)} tasks; `tasks show` shows one (`tasks list` shows several)",
            param_hint="KEY",
        )
    (task_key,) = keys
    partition = partition_of(task_key.ordering_id, settings.partitions)
    with backends(settings) as (_, store):
        view = find_task(store, partition, task_key)
        history = store.attempts(partition, task_key) if view is not None else []
    if view is None:
        raise TaskNotFoundError(
            f"no task {task_key} in the store (partition {partition}); list the ordering id's "
            f"tasks with `scheduler tasks list --ordering-id {task_key.ordering_id}`"
        )
    details = status_dict(view)
    if as_json:
        echo_json({**details, "attempt_history": [attempt_dict(a) for a in history]})
        return
    import json

    for name, value in details.items():
        shown = json.dumps(value, ensure_ascii=False) if name == "data" else value
        if name == "last_error" and history:
            shown = error_summary(value)  # type: ignore[arg-type]  # in full below
        click.echo(f"{name + ':':<19}{'-' if shown is None else shown}")
    echo_history(history)


def _note_unread(log: TaskLog, group_id: str, partitions: list[int]) -> None:
    """Say so when records are still on the log: their tasks are not in the store yet."""
    try:
        lags = log.describe_group(group_id)
    except SchedulerError:
        return  # the listing is still right about what the store holds
    unread = sum(lag.lag for lag in lags if lag.partition in set(partitions))
    if unread > 0:
        echo_err(
            f"note: {unread} record(s) on the log are not yet read by group {group_id!r}; their "
            "tasks appear here once a worker has stored them (is a worker running?)"
        )


tasks.add_command(retry)
tasks.add_command(drop)
tasks.add_command(rerun)
tasks.add_command(cancel)
