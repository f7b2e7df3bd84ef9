"""`scheduler group status`: how far the worker group is, partition by partition.

Two views meet here: the log says who owns each partition and how many records the group has
not read yet (lag); the store says how much read work is due (overdue) and how much a worker
would hold in memory now (in flight: due within the lookahead, capped by the in-flight bound).
A partition with lag but no owner has no worker; one with a growing overdue count has workers
that cannot keep up.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from scheduler.cli.context import CliState, backends, echo_err, pass_state
from scheduler.cli.output import echo_json, echo_table
from scheduler.engine.reload_mark import ReloadMark

if TYPE_CHECKING:
    from scheduler.stores.abc import TaskStore


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
    from scheduler.runtime import partition_count_check

    settings = state.settings()
    rows = []
    with backends(settings, check=False) as (log, store):
        try:
            partition_count_check(log, store, settings.partitions, create_topic=False)
        except PartitionCountMismatchError as error:
            # Shown, not refused: the group's state is what an operator needs to mend it.
            echo_err(f"warning: {error}")
        now_ms = int(time.time() * 1000)
        for lag in sorted(log.describe_group(settings.group_id), key=lambda item: item.partition):
            mark = ReloadMark.decode(lag.metadata)
            due_soon = _count_due(store, lag.partition, now_ms + settings.lookahead_ms, mark)
            rows.append(
                {
                    "partition": lag.partition,
                    "owner": lag.owner,
                    "committed": lag.committed,
                    "end": lag.end,
                    "lag": lag.lag,
                    "in_flight": min(due_soon, settings.max_in_flight),
                    "overdue": _count_due(store, lag.partition, now_ms, mark),
                }
            )
        # For the note under the table only.
        malformed = {} if as_json else store.malformed_counts(limit=_MALFORMED_NOTED)
    if as_json:
        echo_json(rows)
        return
    click.echo(f"group {settings.group_id!r}, topic {settings.topic!r}")
    headers = ["PARTITION", "OWNER", "COMMITTED", "END", "LAG", "IN_FLIGHT", "OVERDUE"]
    table: list[list[object]] = [[row[h.lower()] for h in headers] for row in rows]
    owners = len({row["owner"] for row in rows if row["owner"]})
    sums = [sum(int(row[name] or 0) for row in rows) for name in ("lag", "in_flight", "overdue")]
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


def _count_due(store: TaskStore, partition: int, until_ms: int, mark: ReloadMark | None) -> int:
    """Schedule rows due by `until_ms`. With the partition's committed reload mark, its
    stragglers and the rows after it only: the rows behind it are completed tasks' tombstones,
    which a busy partition has enough of to make Cassandra refuse the read."""
    if mark is None:
        return store.count_due(partition, until_ms)
    stragglers = store.load_keys(
        partition, [k for k in mark.stragglers if k.scheduled_ms <= until_ms]
    )
    return len(stragglers) + store.count_due(partition, until_ms, after=mark.after)
