"""OrderingExecutor: the queue of one ordering id.

The seed gives every ordering id an actor; there can be millions, so here it is a plain object
of its partition's PartitionExecutor: it runs the ordering id's tasks one at a time, in key
order, the next only after the previous reached a final state or a retry wait.
"""

from __future__ import annotations

import heapq

from scheduler.engine.messages import ScheduledTask
from scheduler.engine.task_executor import TaskExecutor
from scheduler.engine.timers import TimerHandle
from scheduler.model import TaskKey


class OrderingExecutor:
    """Pending tasks of one ordering id, in key order, and the one attempt running, if any."""

    __slots__ = ("entries", "heap", "ordering_id", "retry_timer", "running")

    def __init__(self, ordering_id: str) -> None:
        self.ordering_id = ordering_id
        self.entries: dict[TaskKey, ScheduledTask] = {}
        self.heap: list[TaskKey] = []
        self.running: TaskExecutor | None = None
        self.retry_timer: TimerHandle | None = None

    def offer(self, item: ScheduledTask) -> bool:
        """Queue a task; returns False if its key was already queued (its data is replaced)."""
        key = item.key
        known = key in self.entries
        self.entries[key] = item
        if not known:
            heapq.heappush(self.heap, key)
        return not known

    def remove(self, key: TaskKey) -> ScheduledTask | None:
        """Drop a queued task (lazily from the heap); returns it, None if it was not queued."""
        return self.entries.pop(key, None)

    def peek(self) -> ScheduledTask | None:
        """The next task in key order, or None."""
        heap = self.heap
        while heap and heap[0] not in self.entries:
            heapq.heappop(heap)
        return self.entries[heap[0]] if heap else None

    def pop(self) -> None:
        """Take off the task `peek` just returned."""
        del self.entries[heapq.heappop(self.heap)]

    @property
    def busy(self) -> bool:
        """True while an attempt runs or a retry waits: the queue must not start another task."""
        return self.running is not None or self.retry_timer is not None
