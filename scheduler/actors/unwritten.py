"""UnwrittenRows: the keys of a partition whose schedule-row write was tried and has not landed.

A batch the store refused part-way leaves some of its rows in the store and not others (a
Cassandra batch is written row by row; with `LOCAL_QUORUM` unreachable some rows land and some
do not). The worker reads the batch again from the log later and writes it once more, but until
then the store holds rows due *after* keys it does not hold yet. A load that read past the
earliest missing key would hand the later rows on, move the read checkpoint past the missing
ones, and the retry would then push those behind the later ones, which run first (issue 45,
`cassandra-quorum-lost`).

So TaskPersistence notes a batch's keys here before writing them and forgets them once the write
succeeded, and its loads stop before the earliest key noted. Kept by the TopicSupervisor across
the restarts of the partition's tree (in its `PartitionContext`), like the unflushed statuses: the
tree that failed the write is usually not the one that loads next. Dropped with the partition:
its next owner reads the log from the last committed offset, which is before the failed batch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from scheduler.model import ScheduleCursor, TaskKey


class UnwrittenRows:
    """Keys whose schedule rows are being written, or whose write failed; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: set[TaskKey] = set()

    def writing(self, keys: Iterable[TaskKey]) -> None:
        """Call before writing rows of `keys`: they stay noted until `written`."""
        with self._lock:
            self._keys.update(keys)

    def written(self, keys: Iterable[TaskKey]) -> None:
        """The store has the rows of `keys`."""
        with self._lock:
            self._keys.difference_update(keys)

    def earliest(self) -> ScheduleCursor | None:
        """The cursor of the earliest key noted, None when every write landed."""
        with self._lock:
            if not self._keys:
                return None
            return min(key.cursor for key in self._keys)

    def __len__(self) -> int:
        with self._lock:
            return len(self._keys)
