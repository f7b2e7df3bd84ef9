"""`scheduler group status`: how far the worker group is, partition by partition.

The figures come from `scheduler.fleet.status`, which the API's fleet endpoints answer with too.
"""

from __future__ import annotations

import click

from scheduler.cli.context import CliState, backends, echo_err, pass_state
from scheduler.cli.output import echo_json, echo_table


@click.group()
def group() -> None:
    """The worker group: partition owners, offsets, lag and due work."""


@group.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, one object a partition.")
@pass_state
def status(state: CliState, as_json: bool) -> None:
    """Per partition: owner, committed offset, end offset, lag, in-flight and overdue tasks.

    \b
    LAG       records on the log the group has not committed yet (not yet in the store)
    IN_FLIGHT tasks due within the lookahead, at most max_in_flight (what the owner holds)
    OVERDUE   tasks due now or earlier that have not finished (running ones included)
    """
    from scheduler.errors import PartitionCountMismatchError
    from scheduler.fleet.status import group_status
    from scheduler.runtime import partition_count_check

    settings = state.settings()
    with backends(settings, check=False) as (log, store):
        try:
            partition_count_check(log, store, settings.partitions, create_topic=False)
        except PartitionCountMismatchError as error:
            # Shown, not refused: the group's state is what an operator needs to mend it.
            echo_err(f"warning: {error}")
        statuses = group_status(log, store, settings)
        rows = [row.as_dict() for row in statuses]
        # For the note under the table only.
        malformed = {} if as_json else store.malformed_counts(limit=_MALFORMED_NOTED)
    if as_json:
        echo_json(rows)
        return
    click.echo(f"group {settings.group_id!r}, topic {settings.topic!r}")
    headers = ["PARTITION", "OWNER", "COMMITTED", "END", "LAG", "IN_FLIGHT", "OVERDUE"]
    table: list[list[object]] = [[row[h.lower()] for h in headers] for row in rows]
    owners = len({row.owner for row in statuses if row.owner})
    sums = [sum(getattr(row, name) for row in statuses) for name in ("lag", "in_flight", "overdue")]
    table.append(["total", f"{owners} owner(s)", "", "", *sums])
    echo_table(headers, table)
    if malformed:
        kept = sum(malformed.values())
        count = f"{kept}" if kept < _MALFORMED_NOTED else f"{_MALFORMED_NOTED}+"
        partitions = ", ".join(str(p) for p in sorted(malformed))
        echo_err(
            f"note: {count} malformed record(s) on partition(s) {partitions} were set aside; "
            "see `scheduler malformed list`"
        )


_MALFORMED_NOTED = 1000
"""Malformed records counted for the note under the table; more are shown as "1000+"."""
