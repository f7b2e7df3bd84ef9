"""PartitionScheduler: holds a partition's tasks until they are due, then dispatches them.

A heap ordered by due time, one timer armed for the earliest; when it fires, every task due by
then goes in one batch. A plain object of the PartitionExecutor actor, whose thread alone
touches it.
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
        self._wake = wake
        """Called on the timer thread when the earliest task falls due (the owner calls `fire`)."""
        self.held: dict[TaskKey, ScheduledTask] = {}
        self.heap: list[tuple[int, TaskKey]] = []
        self.timer: TimerHandle | None = None
        self.timer_due_ms: int | None = None
        self.stopped = False
        self.awaited: dict[str, list[TaskKey]] = {}
        """Per ordering id, keys being pushed: a due task after one of them waits for it."""
        self.kept_back: set[TaskKey] = set()
        """Due keys held (in `held`, not in the heap) behind an awaited earlier key."""

    def await_keys(self, keys: Iterable[TaskKey]) -> None:
        """These keys are on their way (a push reading their statuses): until `schedule` takes
        them, no later task of their ordering ids is dispatched, so a slow look-up does not let
        a later task start first."""
        for key in keys:
            self.awaited.setdefault(key.ordering_id, []).append(key)

    def oldest_kept_back(self) -> int | None:
        """The lowest `checked` version of the kept-back tasks (None without any)."""
        held = self.held
        return min((held[key].checked for key in self.kept_back if key in held), default=None)

    def _blocked(self, key: TaskKey) -> bool:
        awaited = self.awaited.get(key.ordering_id)
        return awaited is not None and any(other < key for other in awaited)

    def _arrived(self, keys: Iterable[TaskKey]) -> list[ScheduledTask]:
        """Forget these awaited keys; returns the kept-back tasks no longer behind one."""
        for key in keys:
            awaited = self.awaited.get(key.ordering_id)
            if awaited is not None and key in awaited:
                awaited.remove(key)
                if not awaited:
                    del self.awaited[key.ordering_id]
        released = []
        for key in list(self.kept_back):
            if key not in self.held:
                self.kept_back.discard(key)  # cancelled meanwhile
            elif not self._blocked(key):
                self.kept_back.discard(key)
                released.append(self.held.pop(key))
        return released

    def _hand_on(self, due: list[ScheduledTask]) -> None:
        """Dispatch these due tasks, but hold those behind an awaited key of their ordering id."""
        if self.awaited:
            ready = []
            for item in due:
                if self._blocked(item.key):
                    self.held[item.key] = item
                    self.kept_back.add(item.key)
                else:
                    ready.append(item)
            due = ready
        self.ctx.held.scheduled = len(self.held)
        if due:
            self._dispatch(due)

    def schedule(self, items: Iterable[ScheduledTask], arrived: Iterable[TaskKey] = ()) -> None:
        """Hold these tasks until due (dispatch at once those already due). `arrived`: the
        awaited keys this call settles."""
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
            # Held tasks that fell due before their `fire` arrived go too, in key order.
            due += self._pop_due(now)
        if self.awaited:
            due += self._arrived(arrived)
        if len(due) > 1:
            due.sort(key=lambda item: item.key)
        self._hand_on(due)
        self._arm()

    def _pop_due(self, now: int) -> list[ScheduledTask]:
        """Take the held tasks due by `now` off the heap, in due order."""
        due: list[ScheduledTask] = []
        heap, held = self.heap, self.held
        while heap and heap[0][0] <= now:
            _, key = heapq.heappop(heap)
            item = held.pop(key, None)
            if item is not None:  # else cancelled, or dispatched early by an overwrite
                due.append(item)
        return due

    def cancel(self, keys: Iterable[TaskKey]) -> list[TaskKey]:
        """Forget these tasks; returns those not held here (dispatched already, or unknown)."""
        dispatched = [key for key in keys if self.held.pop(key, None) is None]
        self.kept_back.difference_update(keys)
        self.ctx.held.scheduled = len(self.held)
        return dispatched

    def fire(self) -> None:
        """The timer fired: dispatch everything due now."""
        self.timer = None
        self.timer_due_ms = None
        if self.stopped:
            return
        self._hand_on(self._pop_due(self.ctx.clock.now_ms()))
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
