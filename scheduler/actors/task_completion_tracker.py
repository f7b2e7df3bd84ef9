"""TaskCompletionTracker: the status rows of one partition.

Status changes are buffered for a few milliseconds and written in one batch: a task's RUNNING
and SUCCEEDED usually land in the same flush and collapse into one write. Losing a buffer in a
crash is safe: the task's schedule row is still there and it runs again (at-least-once).
Look-ups consult the buffer before the store, so a completion is visible before it is flushed.
The buffer (`UnflushedStatuses`, in the context) is the one piece of state shared across the
tree, and it outlives the tree when the tree is restarted after a failure: the
PartitionExecutor puts changes in it as attempts start and finish, the tracker writes it out,
and TaskPersistence reads it when it pushes tasks. Neither a finish nor a push waits in the
tracker's mailbox behind a flush, so a push sees every finish made before it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

import pykka

from scheduler.actors.base import PartitionActor
from scheduler.actors.context import PartitionContext
from scheduler.engine.outage import Backoff, StoreProbe
from scheduler.engine.timers import TimerHandle
from scheduler.errors import BackendUnavailableError
from scheduler.model import TaskKey

if TYPE_CHECKING:
    from scheduler.actors.partition_executor import PartitionExecutor

#: Flush at once when this many status changes are waiting, whatever the timer says.
FLUSH_AT = 2000


class TaskCompletionTracker(PartitionActor):
    """Writes the buffered status rows in batches."""

    def __init__(self, ctx: PartitionContext) -> None:
        super().__init__(ctx)
        self.unflushed_statuses = ctx.unflushed
        self.timer: TimerHandle | None = None
        self._me: pykka.ActorProxy[TaskCompletionTracker] | None = None
        self._executor: pykka.ActorProxy[PartitionExecutor] | None = None
        self.outage = StoreProbe(
            "status rows",
            ctx.partition,
            Backoff(ctx.settings.restart_backoff_s),
            ctx.clock,
            logging.getLogger("scheduler.partition"),
        )
        """Whether the store refuses the partition's status rows; while it does, the flush
        timer is the store's probe and the PartitionExecutor starts nothing."""

    def on_start(self) -> None:
        self._me = self.actor_ref.proxy()

    def attach_executor(self, executor: pykka.ActorProxy[PartitionExecutor]) -> None:
        """The PartitionExecutor, told when the store refuses status rows and takes them again."""
        self._executor = executor

    def changed(self) -> None:
        """Status changes were put in the buffer: flush now if many wait, else arm the timer
        (in an outage, the probe's timer is armed already)."""
        if len(self.unflushed_statuses) >= FLUSH_AT and not self.outage.down:
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
        try:
            self.unflushed_statuses.write(self.ctx.store, self.ctx.partition)
        except BackendUnavailableError as error:
            # The changes stay in the buffer, where look-ups see them; the next flush probes.
            delay = self.outage.refused(error)
            if self._executor is not None:
                self._executor.store_outage.defer(self.outage.what, True)
            me = self._me
            if me is not None:
                self.timer = self.ctx.timers.call_later(delay, lambda: me.flush.defer())
            return
        if self.outage.answered() and self._executor is not None:
            self._executor.store_outage.defer(self.outage.what, False)

    def discard(self, keys: Collection[TaskKey]) -> None:
        """Remove schedule rows of keys that are already final (a completed key enqueued again)."""
        self.ctx.store.delete_tasks(self.ctx.partition, keys)

    def unflushed(self) -> int:
        return len(self.unflushed_statuses)

    def on_stop(self) -> None:
        self.flush()  # in an outage, the changes left are lost: the next owner runs them again
