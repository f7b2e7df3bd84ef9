"""The base of every partition actor: failures escalate to the partition's supervisor.

The seed's supervision rule: an actor that fails must not be restarted on its own, because it
would come back with an empty mailbox and the tasks in that mailbox would be lost. Instead the
failure escalates and the whole partition is rebuilt from the store, which holds every task.
"""

from __future__ import annotations

import queue
from types import TracebackType
from typing import Any

import pykka

from scheduler.actors.context import PartitionContext

#: The longest an actor waits for another's answer. Past it, something below (a store call) is
#: hung: the waiting actor fails, which restarts the partition instead of stalling it for ever.
ASK_TIMEOUT_S = 300.0


class PartitionActor(pykka.ThreadingActor):
    """A pykka actor of one partition's tree."""

    def __init__(self, ctx: PartitionContext) -> None:
        super().__init__()
        self.ctx = ctx

    @staticmethod
    def _create_actor_inbox() -> Any:
        """A `SimpleQueue` instead of pykka's `queue.Queue`: its put and get are C, without the
        Python `Condition` whose notify and wait held the interpreter in about a quarter of a
        loaded worker's samples (py-spy --gil, docs/benchmark-history.md). pykka uses only
        `put`, `get` and `empty`, which both have; nothing here bounds or joins an inbox."""
        return queue.SimpleQueue()

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        error = exception_value or RuntimeError(f"{type(self).__name__} failed")
        self.ctx.report_failure(self.ctx.partition, self.ctx.generation, error)
