"""The base of every partition actor: failures escalate to the partition's supervisor.

An actor restarted on its own would come back with an empty mailbox; instead the whole
partition is rebuilt from the store, which holds every task (the seed's supervision rule).
"""

from __future__ import annotations

import queue
from types import TracebackType
from typing import Any

import pykka

from scheduler.actors.context import PartitionContext

#: The longest an actor waits for another's answer; past it something below is hung.
ASK_TIMEOUT_S = 300.0


class PartitionActor(pykka.ThreadingActor):
    """A pykka actor of one partition's tree."""

    def __init__(self, ctx: PartitionContext) -> None:
        super().__init__()
        self.ctx = ctx

    @staticmethod
    def _create_actor_inbox() -> Any:
        """A `SimpleQueue` (C put and get) instead of pykka's `queue.Queue`, whose Python
        `Condition` was a quarter of a loaded worker's samples; pykka only calls `put`, `get`
        and `empty`."""
        return queue.SimpleQueue()

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        error = exception_value or RuntimeError(f"{type(self).__name__} failed")
        self.ctx.report_failure(self.ctx.partition, self.ctx.generation, error)
