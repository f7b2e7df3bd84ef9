"""TaskCompletionTracker: the status rows of one partition.

Status changes are buffered for a few milliseconds and written in one batch: a task's RUNNING
and SUCCEEDED usually land in the same flush and collapse into one write. Losing a buffer in a
crash is safe: the task's schedule row is still there and it runs again (at-least-once).
Look-ups consult the buffer before the store, so a completion is visible before it is flushed.
The buffer (`UnflushedStatuses`) is the one piece of state shared across the tree: the
PartitionExecutor puts changes in it as attempts start and finish, the tracker writes it out,
and TaskPersistence reads it when it pushes tasks. Neither a finish nor a push waits in the
tracker's mailbox behind a flush, so a push sees every finish made before it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable

import pykka

from scheduler.actors.base import PartitionActor
from scheduler.actors.context import PartitionContext
from scheduler.engine.timers import TimerHandle
from scheduler.model import TaskKey, TaskStatus
from scheduler.stores.abc import TaskStore

#: Flush at once when this many status changes are waiting, whatever the timer says.
FLUSH_AT = 2000


class UnflushedStatuses:
    """Status changes recorded but not yet in the store; thread-safe.

    Entries leave only after the store has them, so a reader that looks here first and in the
    store second never misses a change made before it looked.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[TaskKey, TaskStatus] = {}

    def put(self, statuses: Iterable[TaskStatus]) -> None:
        """Add changes (a later status of a key replaces an earlier)."""
        with self._lock:
            for status in statuses:
                self._pending[status.key] = status

    def waiting(self) -> list[TaskStatus]:
        with self._lock:
            return list(self._pending.values())

    def written(self, statuses: Iterable[TaskStatus]) -> None:
        """These are in the store now (those replaced meanwhile stay)."""
        with self._lock:
            for status in statuses:
                if self._pending.get(status.key) is status:
                    del self._pending[status.key]

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


class TaskCompletionTracker(PartitionActor):
    """Writes the buffered status rows in batches."""

    def __init__(self, ctx: PartitionContext, unflushed: UnflushedStatuses) -> None:
        super().__init__(ctx)
        self.unflushed_statuses = unflushed
        self.timer: TimerHandle | None = None
        self._me: pykka.ActorProxy | None = None

    def on_start(self) -> None:
        self._me = self.actor_ref.proxy()

    def changed(self) -> None:
        """Status changes were put in the buffer: flush now if many wait, else arm the timer."""
        if len(self.unflushed_statuses) >= FLUSH_AT:
            self.flush()
        elif self.timer is None:
            me = self._me
            assert me is not None
            self.timer = self.ctx.timers.call_later(
                self.ctx.settings.status_flush_ms / 1000, lambda: me.flush.defer()
            )

    def flush(self) -> None:
        """Write every buffered status row now."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        batch = self.unflushed_statuses.waiting()
        if batch:
            self.ctx.store.record_statuses(self.ctx.partition, batch)
            self.unflushed_statuses.written(batch)

    def discard(self, keys: Collection[TaskKey]) -> None:
        """Remove schedule rows of keys that are already final (a completed key enqueued again)."""
        self.ctx.store.delete_tasks(self.ctx.partition, keys)

    def unflushed(self) -> int:
        return len(self.unflushed_statuses)

    def on_stop(self) -> None:
        self.flush()
