"""How far the worker group is, partition by partition: what `scheduler group status` prints and
the API's fleet endpoints answer.

Two views meet here: the log says who owns each partition and how many records the group has
not read yet (lag); the store says how much read work is due (overdue) and how much a worker
would hold in memory now (in flight: due within the lookahead, capped by the in-flight bound).
A partition with lag but no owner has no worker; one with a growing overdue count has workers
that cannot keep up.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from scheduler.engine.reload_mark import ReloadMark

if TYPE_CHECKING:
    from scheduler.logs.abc import TaskLog
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    """One partition of the group's topic as an operator sees it."""

    partition: int
    """The partition number."""
    owner: str | None
    """The group member that owns it now, or None when no worker does."""
    committed: int | None
    """The group's committed offset, or None before the first commit."""
    end: int
    """The log's end offset."""
    lag: int
    """Records on the log the group has not committed yet (not yet in the store)."""
    in_flight: int
    """Tasks due within the lookahead, at most `max_in_flight` (what the owner holds)."""
    overdue: int
    """Tasks due now or earlier that have not finished (running ones included)."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def group_status(
    log: TaskLog, store: TaskStore, settings: Settings, *, now_ms: int | None = None
) -> list[PartitionStatus]:
    """Every partition of the group's topic, in partition order."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    rows = []
    for lag in sorted(log.describe_group(settings.group_id), key=lambda item: item.partition):
        mark = ReloadMark.decode(lag.metadata)
        due_soon = count_due(store, lag.partition, now_ms + settings.lookahead_ms, mark)
        rows.append(
            PartitionStatus(
                partition=lag.partition,
                owner=lag.owner,
                committed=lag.committed,
                end=lag.end,
                lag=lag.lag,
                in_flight=min(due_soon, settings.max_in_flight),
                overdue=count_due(store, lag.partition, now_ms, mark),
            )
        )
    return rows


def workers(rows: list[PartitionStatus]) -> dict[str, list[int]]:
    """Each group member that owns partitions, with the partitions it owns."""
    owned: dict[str, list[int]] = {}
    for row in rows:
        if row.owner:
            owned.setdefault(row.owner, []).append(row.partition)
    return dict(sorted(owned.items()))


def count_due(store: TaskStore, partition: int, until_ms: int, mark: ReloadMark | None) -> int:
    """Schedule rows due by `until_ms`. With the partition's committed reload mark, its
    stragglers and the rows after it only: the rows behind it are completed tasks' tombstones,
    which a busy partition has enough of to make Cassandra refuse the read."""
    if mark is None:
        return store.count_due(partition, until_ms)
    stragglers = store.load_keys(
        partition, [k for k in mark.stragglers if k.scheduled_ms <= until_ms]
    )
    return len(stragglers) + store.count_due(partition, until_ms, after=mark.after)
