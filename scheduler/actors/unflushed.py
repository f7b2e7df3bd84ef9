"""UnflushedStatuses: a partition's status changes recorded but not yet in the store.

Lookups see them here first. The TopicSupervisor keeps the buffer across restarts of the
partition's tree (a tree that died on a bug cannot write its last changes; the next one writes
them first); it is dropped when the partition leaves the worker (its next owner reruns those
tasks, at-least-once).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable

from scheduler.model import TaskKey, TaskStatus
from scheduler.stores.abc import TaskStore

FLUSH_AT = 2000
"""The writer flushes at once when this many status changes are waiting, whatever its timer
says."""

_ASLEEP, _WOKEN, _FULL = 0, 1, 2
"""`UnflushedStatuses.wake_writer` states: not told since the last `waiting`; told; told that
the buffer is full."""


class UnflushedStatuses:
    """Status changes recorded but not yet in the store; thread-safe.

    Entries leave only after the store has them, so a reader that looks here, then in the store,
    misses no change. Every `put` moves `version` on: a reader that took the version before it
    looked saw every change up to it (how the PartitionExecutor tells a copy read before a
    finish from one read after).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[TaskKey, TaskStatus] = {}
        self._version = 0
        self._woken = _ASLEEP

    @property
    def version(self) -> int:
        """How many `put`s this buffer took so far."""
        with self._lock:
            return self._version

    def put(self, statuses: Iterable[TaskStatus]) -> int:
        """Add changes (a later status of a key replaces an earlier and takes over its attempt
        records); returns the version they were given."""
        with self._lock:
            self._version += 1
            pending = self._pending
            for status in statuses:
                earlier = pending.get(status.key)
                if earlier is not None and earlier.attempt_log:
                    status = status.with_attempts(earlier.attempt_log)
                pending[status.key] = status
            return self._version

    def wake_writer(self, full_at: int) -> bool:
        """Whether the writer must be told that changes wait: once after each `waiting` (it
        arms its flush timer), and once more when `full_at` wait (it flushes at once); not
        once per `put`, which flooded its mailbox under load."""
        with self._lock:
            if self._woken == _ASLEEP:
                self._woken = _FULL if len(self._pending) >= full_at else _WOKEN
                return True
            if self._woken == _WOKEN and len(self._pending) >= full_at:
                self._woken = _FULL
                return True
            return False

    def waiting(self) -> list[TaskStatus]:
        """The changes to write now; a `put` after this wakes the writer again."""
        with self._lock:
            self._woken = _ASLEEP
            return list(self._pending.values())

    def written(self, statuses: Iterable[TaskStatus]) -> None:
        """These are in the store now (those replaced meanwhile stay)."""
        with self._lock:
            for status in statuses:
                if self._pending.get(status.key) is status:
                    del self._pending[status.key]

    def write(self, store: TaskStore, partition: int) -> None:
        """Write every waiting change; those written leave the buffer."""
        batch = self.waiting()
        if batch:
            store.record_statuses(partition, batch)
            self.written(batch)

    def __len__(self) -> int:
        return len(self._pending)

    def peek(self, keys: Iterable[TaskKey]) -> dict[TaskKey, TaskStatus]:
        """The unflushed changes of these keys only."""
        with self._lock:
            return {key: self._pending[key] for key in keys if key in self._pending}

    def lookup(
        self, store: TaskStore, partition: int, keys: Collection[TaskKey]
    ) -> dict[TaskKey, TaskStatus]:
        """Status of these keys: unflushed changes first, then the store."""
        found = self.peek(keys)
        missing = [key for key in keys if key not in found]
        if missing:
            found.update(store.fetch_statuses(partition, missing))
        return found
