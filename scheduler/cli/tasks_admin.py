"""`scheduler tasks retry|drop|cancel`: operator changes, checked against the store first.

The change itself is a message on the log (the client's `retry_task`, `drop_task`,
`cancel_task`), applied by the worker that owns the task's partition in order with its tasks.
Checking first matters because that worker can only log a change that does not apply: the
operator would never see why nothing happened. Every key is checked before anything is sent, so
a refusal leaves nothing half done.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future

import click

from scheduler.cli.context import CliState, backends, pass_state
from scheduler.cli.keys import describe_key, find_task, parse_keys, partition_of
from scheduler.errors import TaskNotFoundError, TaskStateError
from scheduler.model import TaskKey, TaskState

ACK_TIMEOUT_S = 60.0

_KEYS = click.argument("keys", nargs=-1, required=True, metavar="KEY...")


@click.command()
@_KEYS
@pass_state
def retry(state: CliState, keys: Sequence[str]) -> None:
    """Run FAILED tasks again from their first attempt, with the data they failed with.

    Give each task as ORDERING_ID/TIME/UNIQUENESS_KEY, as logs print it, or as its three parts
    ORDERING_ID TIME UNIQUENESS_KEY; several tasks one after the other.
    """
    _change(state, keys, "retry", {TaskState.FAILED}, "only failed tasks can be retried")


@click.command()
@_KEYS
@pass_state
def drop(state: CliState, keys: Sequence[str]) -> None:
    """Forget FAILED tasks: their status rows are deleted and they never run again.

    Give each task as ORDERING_ID/TIME/UNIQUENESS_KEY, as logs print it, or as its three parts
    ORDERING_ID TIME UNIQUENESS_KEY; several tasks one after the other.
    """
    _change(state, keys, "drop", {TaskState.FAILED}, "only failed tasks can be dropped")


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
    _change(
        state,
        keys,
        "cancel",
        {TaskState.PENDING, TaskState.RUNNING, TaskState.RETRYING},
        "only pending, running or retrying tasks can be cancelled",
    )


def _change(
    state: CliState, parts: Sequence[str], verb: str, allowed: Collection[TaskState], rule: str
) -> None:
    from scheduler.client import SchedulerClient

    settings = state.settings()
    keys = parse_keys(parts, "KEY")
    with backends(settings) as (log, store):
        refusals = []
        for key in keys:
            partition = partition_of(key.ordering_id, settings.partitions)
            view = find_task(store, partition, key)
            if view is None:
                refusals.append(
                    f"no task {describe_key(key)} in the store (partition {partition}); check "
                    f"the key with `scheduler tasks list --ordering-id {key.ordering_id}`"
                )
            elif view.state not in allowed:
                refusals.append(f"cannot {verb} {describe_key(key)}: it is {view.state}; {rule}")
        if refusals:
            not_found = all(refusal.startswith("no task") for refusal in refusals)
            error_type = TaskNotFoundError if not_found else TaskStateError
            raise error_type("; ".join(refusals) + "; nothing was changed")
        client = SchedulerClient(log=log)
        try:
            operation: Callable[[TaskKey], Future[int]] = getattr(client, f"{verb}_task")
            futures = [operation(key) for key in keys]
            for future in futures:
                future.result(timeout=ACK_TIMEOUT_S)
        finally:
            client.close()
    for key in keys:
        partition = partition_of(key.ordering_id, settings.partitions)
        click.echo(f"{verb} requested for {describe_key(key)} (partition {partition})")
