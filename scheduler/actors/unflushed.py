"""UnflushedStatuses: a partition's status changes recorded but not yet in the store.

While the store refuses status writes (an OUTAGE of the partition, `engine.outage`) the changes
wait here, where every look-up sees them, and the flush that ends the outage writes them. The
TopicSupervisor keeps the buffer across the restarts of the partition's tree (in its
`PartitionContext`), like the reload mark: a tree that dies on a bug cannot write its last
changes, and a fresh tree that forgot them would run again every task that finished just
before. The new tree writes them first, and its loads skip what they show finished. When the
partition leaves the worker they are dropped: its next owner reruns those tasks
(at-least-once), as after a crash.
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

    Entries leave only after the store has them, so a reader that looks here first and in the
    store second never misses a change made before it looked.

    Every `put` moves the buffer's `version` on by one. A reader that takes the version before
    it looks knows which changes it saw: all those of a version up to its own. That is how the
    PartitionExecutor tells a copy of a task read before the task finished (refused) from one
    read after (whose reader saw the finish): by versions, not by times.
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
        """Add changes (a later status of a key replaces an earlier, and takes over the attempt
        records the earlier one carried: a start and an end, or a retry's failure and the next
        start, written in one flush are all kept); returns the version they were given."""
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
        """Whether the writer must be told that changes wait: once after each `waiting`
        (the writer arms its flush timer then), and once more when `full_at` changes wait
        (it flushes at once). The writer is told once per flush, not once per `put`: under
        load a partition's changes came as tens of thousands of messages a second into the
        mailbox its persists wait in."""
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
