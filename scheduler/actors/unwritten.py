"""UnwrittenRows: the batches of one partition the store refused, each with its earliest schedule
row and the last log offset it was read from; a plain object of TaskPersistence.

A store can take some rows of a batch and refuse the rest (Cassandra writes a batch row by row).
Until the poll loop's retry lands, the store holds rows due after keys it does not hold yet; a
load that read past the earliest missing key would move the checkpoint past it, and the retry
would push it behind tasks already run. So loads stop before the earliest row noted here. A
note goes once a batch read up to its last offset (or further) is stored: the poll loop stores
a partition's records in offset order, retrying a refused batch before anything later. Notes
outlive the tree (a tree restarted on a bug goes on from them, as from its unflushed statuses)
and die with the partition's ownership: its next owner reads again from its committed offset.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.model import ScheduleCursor, TaskKey


class UnwrittenRows:
    """The refused batches of a partition whose records no stored batch has reached yet."""

    def __init__(self) -> None:
        self._refused: list[tuple[int, ScheduleCursor]] = []
        """Per refused batch, the offset of its last record (a batch stored up to it, or
        further, ends it) and the cursor of its earliest schedule row (loads stop before it)."""

    def refused(self, keys: Iterable[TaskKey], last_offset: int) -> None:
        """The store refused the batch of these schedule rows, read up to `last_offset`: some
        of its rows may be in the store, others not."""
        earliest = min((key.cursor for key in keys), default=None)
        if earliest is not None:
            self._refused.append((last_offset, earliest))

    def stored(self, last_offset: int) -> None:
        """The store has a batch read up to `last_offset`: forget the refused batches it
        reached."""
        if self._refused:
            self._refused = [r for r in self._refused if r[0] > last_offset]

    def earliest(self) -> ScheduleCursor | None:
        """The cursor of the earliest row of a refused batch; None when there is none."""
        return min((earliest for _, earliest in self._refused), default=None)

    def __len__(self) -> int:
        return len(self._refused)
