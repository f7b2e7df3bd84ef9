"""ReloadMark: where a partition's next owner starts reading the store, past the tombstones.

A new owner of a partition has no read cursor; reading from the first row would scan every
tombstone of the tasks completed since compaction (slow, and past Cassandra's
`tombstone_failure_threshold` the read fails). The mark says where to start: every schedule row
at or before `after` that may still be live is one of `stragglers`. The owner keeps it true:
before it writes a row at or before `after` it adds the key to the stragglers or moves `after`
back (`covering`); now and then it moves `after` forward over completed rows (TaskPersistence's
`advance_mark`).

The mark travels as the metadata of the partition's committed offset: rows written after the
last commit come from records the next owner reads again, and Kafka refuses commits from a
worker that lost the partition. A commit without a mark leaves none: the next owner reads all.
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
        # The time first: `cursor` builds a tuple per key, and most rows are ahead of the mark.
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
    """One partition's current mark, shared by its tree (which keeps it true) and the poll
    thread (which commits it); kept across restarts of the tree; thread-safe."""

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
