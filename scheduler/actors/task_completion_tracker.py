"""TaskCompletionTracker: the status rows of one partition.

Status changes are buffered for a few milliseconds and written in one batch: a task's RUNNING
and SUCCEEDED usually land in the same flush and collapse into one write. Losing a buffer in a
crash is safe: the task's schedule row is still there and it runs again (at-least-once).
Look-ups consult the buffer before the store, so a completion is visible before it is flushed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pykka

from scheduler.actors.base import PartitionActor
from scheduler.actors.context import PartitionContext
from scheduler.engine.timers import TimerHandle
from scheduler.model import TaskKey, TaskStatus

#: Flush at once when this many status changes are waiting, whatever the timer says.
FLUSH_AT = 2000


class TaskCompletionTracker(PartitionActor):
    """Buffers and writes status rows; answers whether tasks already reached a final state."""

    def __init__(self, ctx: PartitionContext) -> None:
        super().__init__(ctx)
        self.pending: dict[TaskKey, TaskStatus] = {}
        self.timer: TimerHandle | None = None
        self._me: pykka.ActorProxy | None = None

    def on_start(self) -> None:
        self._me = self.actor_ref.proxy()

    def record(self, statuses: Sequence[TaskStatus]) -> None:
        """Queue status rows for the next flush (a later status of a key replaces an earlier)."""
        pending = self.pending
        for status in statuses:
            pending[status.key] = status
        if len(pending) >= FLUSH_AT:
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
        if self.pending:
            batch = list(self.pending.values())
            self.ctx.store.record_statuses(self.ctx.partition, batch)
            self.pending.clear()

    def fetch(self, keys: Collection[TaskKey]) -> dict[TaskKey, TaskStatus]:
        """Status of these keys: buffered changes first, then the store."""
        found = {key: self.pending[key] for key in keys if key in self.pending}
        missing = [key for key in keys if key not in found]
        if missing:
            found.update(self.ctx.store.fetch_statuses(self.ctx.partition, missing))
        return found

    def discard(self, keys: Collection[TaskKey]) -> None:
        """Remove schedule rows of keys that are already final (a completed key enqueued again)."""
        self.ctx.store.delete_tasks(self.ctx.partition, keys)

    def unflushed(self) -> int:
        return len(self.pending)

    def on_stop(self) -> None:
        self.flush()
