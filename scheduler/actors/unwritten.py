"""UnwrittenRows: the batches of a partition whose schedule rows were tried and are not all in
the store, each with the last log offset it was read from.

A batch the store refused part-way leaves some of its rows in the store and not others (a
Cassandra batch is written row by row; with `LOCAL_QUORUM` unreachable some rows land and some
do not). The worker reads the batch again from the log later and writes it once more, but until
then the store holds rows due *after* keys it does not hold yet. A load that read past the
earliest missing key would hand the later rows on, move the read checkpoint past the missing
ones, and the retry would then push those behind the later ones, which run first (issue 45,
`cassandra-quorum-lost`).

So TaskPersistence notes a batch's keys and last offset here before writing it, and its loads
stop before the earliest key noted. A note goes when its batch is durable, or when a later
batch is, whose records reach its last offset: the poll loop stores a partition's records in
offset order and re-reads a failed batch before anything after it, so a batch stored up to that
offset has either stored the failed one's records again or found them deleted by the log's
retention (lost, and reported by the worker's `TopicGuard`). Either way no retry of them is
coming, and a note kept for them would stop the partition's loads for good.

Kept by the TopicSupervisor across the restarts of the partition's tree (in its
`PartitionContext`), like the unflushed statuses: the tree that failed the write is usually not
the one that loads next. Dropped with the partition: its next owner reads the log from the last
committed offset, which is before the failed batch.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.model import ScheduleCursor, TaskKey


@dataclass(frozen=True, slots=True)
class Note:
    """One batch being written."""

    number: int
    """Tells notes apart (two batches may share keys and offsets, when one is read again)."""
    last_offset: int | None
    """The offset of the batch's last record; None for a batch not read from the log (a
    caller outside the poll loop), whose note goes only when the batch is durable."""
    earliest: ScheduleCursor | None
    """The cursor of the batch's earliest schedule row; None for a batch without any."""


class UnwrittenRows:
    """Batches being written or whose write failed, per `Note`; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._notes: dict[int, Note] = {}
        self._numbers = itertools.count()

    def writing(self, keys: Iterable[TaskKey], last_offset: int | None) -> Note:
        """Call before writing the rows of `keys`, read up to `last_offset`: they count as
        unwritten until `written` is called with the note returned."""
        earliest = min((key.cursor for key in keys), default=None)
        note = Note(next(self._numbers), last_offset, earliest)
        with self._lock:
            self._notes[note.number] = note
        return note

    def written(self, note: Note) -> None:
        """The store has the batch of `note`: forget it, and every batch read no further than
        it (their records were stored again, or deleted by retention before the retry)."""
        with self._lock:
            self._notes.pop(note.number, None)
            if note.last_offset is None:
                return
            for other in list(self._notes.values()):
                if other.last_offset is not None and other.last_offset <= note.last_offset:
                    del self._notes[other.number]

    def earliest(self) -> ScheduleCursor | None:
        """The cursor of the earliest row noted, None when no noted batch has one."""
        with self._lock:
            cursors = [n.earliest for n in self._notes.values() if n.earliest is not None]
        return min(cursors, default=None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._notes)
