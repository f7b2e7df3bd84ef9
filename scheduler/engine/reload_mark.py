"""ReloadMark: where a partition's next owner starts reading the store, past the tombstones.

A partition's tree reads its schedule rows forward from a cursor, so the rows deleted behind the
cursor (completed tasks: Cassandra tombstones) are never scanned again while the tree lives. A
new owner of the partition (after a rebalance, a restart or a crash) has no cursor, and reading
from the first row of the oldest bucket would scan every tombstone of every task completed there
since compaction last purged them: slow, and past `tombstone_failure_threshold` (100,000) the
read fails and the partition cannot load at all.

The mark says where to start instead: every schedule row at or before `after` that may still be
live is one of `stragglers` (a task retrying for hours, a long run). A new owner loads the
stragglers by key and reads forward from `after`. The owner keeps the mark true:

* **before** it writes a row at or before `after`, it adds the row's key to the stragglers, or
  moves `after` back before it (`covering`);
* now and then it moves `after` forward over what the store shows completed (TaskPersistence's
  `advance_mark`), recording the live rows it steps over as stragglers.

The mark travels as the metadata of the partition's committed log offset. Every schedule row
comes from a log record, so rows written after the last commit come from records the next owner
reads again and covers itself; and Kafka refuses commits from a worker that lost the partition,
so a stalled former owner cannot overwrite the mark of the current one. A commit without a mark
(an operator's rewind, another tool) leaves none, and the next owner reads from the beginning.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.model import ScheduleCursor, TaskKey

MAX_ENCODED_BYTES = 3800
"""Kafka keeps at most `offset.metadata.max.bytes` (4096 by default) of a commit's metadata; the
mark stays under it, with room for the broker's own accounting."""
MAX_STRAGGLERS = 32
"""Beyond this many stragglers the mark's `after` stops moving, instead of growing the mark."""
_VERSION = 1


def just_before(scheduled_ms: int) -> ScheduleCursor:
    """The cursor just before every key scheduled at or after `scheduled_ms` (ordering ids are
    never empty, so no key sorts before `(scheduled_ms, "", "")` within that millisecond)."""
    return (scheduled_ms, "", "")


@dataclass(frozen=True, slots=True)
class ReloadMark:
    """Every schedule row at or before `after` that may be live is in `stragglers`."""

    after: ScheduleCursor
    stragglers: tuple[TaskKey, ...] = ()

    def covering(self, keys: Iterable[TaskKey]) -> ReloadMark:
        """The mark once rows of `keys` are written: keys at or before `after` become
        stragglers, or, past `MAX_STRAGGLERS`, `after` moves back before the earliest of them."""
        known, after, after_ms = set(self.stragglers), self.after, self.after[0]
        # The time first: most rows are ahead of the mark, and `cursor` builds a tuple per key
        # (this runs for every persisted batch).
        behind = sorted(
            {k for k in keys if k.scheduled_ms <= after_ms and k.cursor <= after and k not in known}
        )
        if not behind:
            return self
        stragglers = sorted(known.union(behind))
        if len(stragglers) <= MAX_STRAGGLERS:
            return ReloadMark(self.after, tuple(stragglers))
        after = just_before(behind[0].scheduled_ms)
        return ReloadMark(after, tuple(k for k in stragglers if k.cursor <= after))

    def encode(self) -> str:
        """The commit metadata: compact JSON, at most `MAX_ENCODED_BYTES` (long keys make a
        mark with fewer stragglers and an earlier `after`)."""
        mark = self
        while True:
            text = json.dumps(
                [_VERSION, list(mark.after), [list(k.cursor) for k in mark.stragglers]],
                separators=(",", ":"),
                ensure_ascii=False,
            )
            if len(text.encode()) <= MAX_ENCODED_BYTES:
                return text
            if mark.stragglers:  # keep the earliest stragglers; read from the last one dropped
                after = min(mark.after, just_before(mark.stragglers[-1].scheduled_ms))
                kept = tuple(k for k in mark.stragglers[:-1] if k.cursor <= after)
                mark = ReloadMark(after, kept)
            else:
                return ""  # an `after` alone this long: no mark, the next owner reads it all

    @classmethod
    def decode(cls, text: str | None) -> ReloadMark | None:
        """The mark in commit metadata, or None for none (empty, another tool's, another
        version's): then the next owner reads the partition from its first row."""
        if not text:
            return None
        try:
            version, after, stragglers = json.loads(text)
            if version != _VERSION:
                return None
            ms, oid, uk = after
            keys = tuple(TaskKey.from_ms(o, m, u) for m, o, u in stragglers)
            return cls((int(ms), str(oid), str(uk)), keys)
        except (ValueError, TypeError):
            return None


class MarkHolder:
    """One partition's current mark, shared by its tree (which keeps it true) and the worker's
    poll thread (which commits it); kept across restarts of the tree. Thread-safe: the mark is
    immutable and replaced in one assignment."""

    def __init__(self, mark: ReloadMark | None = None) -> None:
        self._lock = threading.Lock()
        self.mark = mark
        self.version = 0
        """Incremented on every change, so the worker commits only changed marks."""

    def cover(self, keys: Iterable[TaskKey]) -> None:
        """Call before writing rows of `keys` (a no-op without a mark: nothing is skipped)."""
        with self._lock:
            if self.mark is not None:
                self._set(self.mark.covering(keys))

    def replace(self, mark: ReloadMark) -> None:
        with self._lock:
            self._set(mark)

    def _set(self, mark: ReloadMark) -> None:
        if mark != self.mark:
            self.mark = mark
            self.version += 1

    def encoded(self) -> tuple[int, str]:
        """(version, metadata to commit)."""
        with self._lock:
            mark, version = self.mark, self.version
        return version, "" if mark is None else mark.encode()
