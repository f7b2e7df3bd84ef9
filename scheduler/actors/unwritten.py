"""UnwrittenRows: the batches of one partition that the store refused, each with its earliest
schedule row and the last log offset it was read from. A plain object of the partition's
TaskPersistence, which alone reads and writes it.

A store can take some rows of a batch and refuse the rest (a Cassandra batch is written row by
row; with `LOCAL_QUORUM` out of reach some rows land and some do not). The partition enters
OUTAGE (`engine.outage`): the poll loop holds the batch and writes it again when the store's
probe is due, while the tree stays up and keeps loading. Until the retry lands, the store holds
rows due *after* keys it does not hold yet; a load that read past the earliest missing key
would hand the later rows on and move the read checkpoint past the missing ones, which the
retry would then push behind tasks already run (issue 45, `cassandra-quorum-lost`).

So a refused batch is noted here, and TaskPersistence's loads stop before the earliest row
noted. A note goes when a batch read up to its last offset (or further) is stored: the poll
loop stores a partition's records in offset order and writes a refused batch again, with what
it read after it, before anything later, so that batch has stored the refused one's rows. The
retry is not the refused batch itself (records read after the pause are held behind it), so a
note is tied to an offset, not to its batch; and so no note outlives the records it waits for,
whatever brought the stored offset past them (a refused batch whose records the log's retention
deleted ends its note as well, and the partition loads on).

Notes die with the tree: a partition that leaves the worker is read again from its committed
offset by its next owner, before the refused batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.model import ScheduleCursor, TaskKey


@dataclass(frozen=True, slots=True)
class Refused:
    """One batch the store refused."""

    last_offset: int
    """The offset of the batch's last record: a batch stored up to it (or further) ends it."""
    earliest: ScheduleCursor
    """The cursor of the batch's earliest schedule row: loads stop before it."""


class UnwrittenRows:
    """The refused batches of a partition whose records no stored batch has reached yet."""

    __slots__ = ("_refused",)

    def __init__(self) -> None:
        self._refused: list[Refused] = []

    def refused(self, keys: Iterable[TaskKey], last_offset: int) -> None:
        """The store refused the batch of these schedule rows, read up to `last_offset`: some
        of its rows may be in the store, others not."""
        earliest = min((key.cursor for key in keys), default=None)
        if earliest is not None:
            self._refused.append(Refused(last_offset, earliest))

    def stored(self, last_offset: int) -> None:
        """The store has a batch read up to `last_offset`: forget the refused batches it
        reached."""
        self._refused = [r for r in self._refused if r.last_offset > last_offset]

    def earliest(self) -> ScheduleCursor | None:
        """The cursor of the earliest row of a refused batch; None when there is none."""
        return min((r.earliest for r in self._refused), default=None)

    def __bool__(self) -> bool:
        return bool(self._refused)

    def __len__(self) -> int:
        return len(self._refused)
