"""PartitionScheduler: holds a partition's tasks until they are due, then dispatches them.

Tasks sit in a heap ordered by due time. One timer is armed for the earliest; when it fires, every
task due by then goes to the PartitionExecutor in one batch. Nothing polls: with no task due the
actor sleeps on its mailbox.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

import pykka

from scheduler.actors.base import PartitionActor
from scheduler.actors.context import PartitionContext
from scheduler.actors.messages import ScheduledTask
from scheduler.engine.timers import TimerHandle
from scheduler.model import TaskKey


class PartitionScheduler(PartitionActor):
    """Holds not-yet-due tasks of one partition and fires them on time."""

    def __init__(self, ctx: PartitionContext, executor: pykka.ActorProxy) -> None:
        super().__init__(ctx)
        self._executor = executor
        self.held: dict[TaskKey, ScheduledTask] = {}
        self.heap: list[tuple[int, TaskKey]] = []
        self.timer: TimerHandle | None = None
        self.timer_due_ms: int | None = None
        self.stopped = False
        self._me: pykka.ActorProxy | None = None

    def on_start(self) -> None:
        self._me = self.actor_ref.proxy()

    def schedule(self, items: Iterable[ScheduledTask]) -> None:
        """Hold these tasks until due (dispatch at once those already due)."""
        if self.stopped:
            return
        now = self.ctx.clock.now_ms()
        due: list[ScheduledTask] = []
        for item in items:
            key = item.key
            if key.scheduled_ms <= now:
                self.held.pop(key, None)
                due.append(item)
            elif key in self.held:
                self.held[key] = item  # an overwrite: same key, same due time, newer data
            else:
                self.held[key] = item
                heapq.heappush(self.heap, (key.scheduled_ms, key))
        if due:
            self._executor.execute.defer(due)
        self._arm()
        self.ctx.held.scheduled = len(self.held)

    def cancel(self, keys: Iterable[TaskKey]) -> None:
        """Forget these tasks; those already dispatched are cancelled by the executor."""
        dispatched = [key for key in keys if self.held.pop(key, None) is None]
        self.ctx.held.scheduled = len(self.held)
        if dispatched:
            self._executor.cancel.defer(dispatched)

    def fire(self, generation: int) -> None:
        """Timer callback: dispatch everything due now."""
        self.timer = None
        self.timer_due_ms = None
        if self.stopped:
            return
        now = self.ctx.clock.now_ms()
        due: list[ScheduledTask] = []
        heap, held = self.heap, self.held
        while heap and heap[0][0] <= now:
            _, key = heapq.heappop(heap)
            item = held.pop(key, None)
            if item is not None:  # else cancelled, or dispatched early by an overwrite
                due.append(item)
        if due:
            self._executor.execute.defer(due)
        self._arm()
        self.ctx.held.scheduled = len(self.held)

    def _arm(self) -> None:
        heap = self.heap
        while heap and heap[0][1] not in self.held:
            heapq.heappop(heap)
        if not heap:
            return
        due_ms = heap[0][0]
        if self.timer_due_ms is not None and self.timer_due_ms <= due_ms:
            return
        if self.timer is not None:
            self.timer.cancel()
        proxy = self._me
        assert proxy is not None
        generation = self.ctx.generation
        self.timer_due_ms = due_ms
        self.timer = self.ctx.timers.call_at_ms(due_ms, lambda: proxy.fire.defer(generation))

    def counts(self) -> tuple[int, int]:
        """(tasks held, of which already due)."""
        now = self.ctx.clock.now_ms()
        return len(self.held), sum(1 for key in self.held if key.scheduled_ms <= now)

    def stop_scheduling(self) -> None:
        """Revocation: dispatch nothing more."""
        self.stopped = True
        if self.timer is not None:
            self.timer.cancel()

    def on_stop(self) -> None:
        self.stop_scheduling()
