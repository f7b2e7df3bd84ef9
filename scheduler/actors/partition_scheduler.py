"""PartitionScheduler: holds a partition's tasks until they are due, then dispatches them.

Tasks sit in a heap ordered by due time. One timer is armed for the earliest; when it fires, every
task due by then is dispatched in one batch. Nothing polls: with no task due nothing runs.

It is a plain object owned by the PartitionExecutor actor, whose thread is the only one that
touches it: holding tasks needs no thread of its own, and a due task goes to its ordering id's
queue without a message between two actors.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from scheduler.actors.context import PartitionContext
from scheduler.engine.messages import ScheduledTask
from scheduler.engine.timers import TimerHandle
from scheduler.model import TaskKey


class PartitionScheduler:
    """Holds not-yet-due tasks of one partition and fires them on time."""

    def __init__(
        self,
        ctx: PartitionContext,
        dispatch: Callable[[list[ScheduledTask]], None],
        wake: Callable[[], None],
    ) -> None:
        self.ctx = ctx
        self._dispatch = dispatch
        """Takes the tasks due now (on the owning actor's thread)."""
        self._wake = wake
        """Called on the timer thread when the earliest task falls due: it has the owning actor
        call `fire`."""
        self.held: dict[TaskKey, ScheduledTask] = {}
        self.heap: list[tuple[int, TaskKey]] = []
        self.timer: TimerHandle | None = None
        self.timer_due_ms: int | None = None
        self.stopped = False

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
        self.ctx.held.scheduled = len(self.held)
        if due:
            self._dispatch(due)
        self._arm()

    def cancel(self, keys: Iterable[TaskKey]) -> list[TaskKey]:
        """Forget these tasks; returns those not held here (dispatched already, or unknown)."""
        dispatched = [key for key in keys if self.held.pop(key, None) is None]
        self.ctx.held.scheduled = len(self.held)
        return dispatched

    def fire(self) -> None:
        """The timer fired: dispatch everything due now."""
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
        self.ctx.held.scheduled = len(self.held)
        if due:
            self._dispatch(due)
        self._arm()

    def _arm(self) -> None:
        heap = self.heap
        while heap and heap[0][1] not in self.held:
            heapq.heappop(heap)
        if not heap or self.stopped:
            return
        due_ms = heap[0][0]
        if self.timer_due_ms is not None and self.timer_due_ms <= due_ms:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer_due_ms = due_ms
        self.timer = self.ctx.timers.call_at_ms(due_ms, self._wake)

    def counts(self) -> tuple[int, int]:
        """(tasks held, of which already due)."""
        now = self.ctx.clock.now_ms()
        return len(self.held), sum(1 for key in self.held if key.scheduled_ms <= now)

    def stop_scheduling(self) -> None:
        """Revocation: dispatch nothing more."""
        self.stopped = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
            self.timer_due_ms = None
