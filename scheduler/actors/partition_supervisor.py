"""PartitionSupervisor: builds one partition's actor tree and takes it down in order.

A tree is three actors, started leaves first so that each is given live proxies of those it
talks to: the TaskCompletionTracker (writes status rows), the PartitionExecutor (with the
PartitionScheduler in it: holds, queues and runs tasks), and TaskPersistence (with the
ThroughputController in it: writes schedule rows, loads them), whose first tick, once the tree
is wired, loads the partition's incomplete tasks from the store.

Stopping is the seed's revocation choreography, per partition and under a deadline: stop loading
and scheduling at once, let running attempts finish, cancel those that outlive the deadline,
flush the status rows, then stop every actor.
"""

from __future__ import annotations

from typing import Any

import pykka

from scheduler.actors.base import ASK_TIMEOUT_S
from scheduler.actors.context import PartitionContext
from scheduler.actors.partition_executor import PartitionExecutor
from scheduler.actors.task_completion_tracker import TaskCompletionTracker
from scheduler.actors.task_persistence import TaskPersistence
from scheduler.engine.deadline import StopDeadline
from scheduler.engine.messages import PartitionCounts
from scheduler.model import TaskKey
from scheduler.wording import counted

#: After cancelling, how long attempts get to notice before the partition is let go regardless.
CANCEL_GRACE_S = 5.0
#: Keys named in a log line, at most; the rest are counted.
KEYS_SHOWN = 5


class PartitionSupervisor(pykka.ThreadingActor):
    """Owns the actor tree of one partition."""

    def __init__(self, ctx: PartitionContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.refs: list[pykka.ActorRef[Any]] = []

    def on_start(self) -> None:
        ctx = self.ctx
        tracker_ref = TaskCompletionTracker.start(ctx)
        self._tracker = tracker_ref.proxy()
        executor_ref = PartitionExecutor.start(ctx, self._tracker)
        self._executor = executor_ref.proxy()
        self._tracker.attach_executor(self._executor).get(timeout=ASK_TIMEOUT_S)
        persistence_ref = TaskPersistence.start(ctx, self._executor)
        self._persistence = persistence_ref.proxy()
        self._executor.attach_controller(self._persistence).get(timeout=ASK_TIMEOUT_S)
        # Stop order: the one that feeds work in first, the tracker (which flushes) last.
        self.refs = [persistence_ref, executor_ref, tracker_ref]
        self._persistence.begin.defer()  # the first load, now that every actor is wired

    def persistence_proxy(self) -> pykka.ActorProxy[TaskPersistence]:
        return self._persistence

    def counts(self) -> PartitionCounts:
        scheduled, due_held = self._executor.scheduled_counts().get(timeout=ASK_TIMEOUT_S)
        executing, running = self._executor.counts().get(timeout=ASK_TIMEOUT_S)
        return PartitionCounts(
            scheduled,
            due_held,
            executing,
            running,
            self._tracker.unflushed().get(timeout=ASK_TIMEOUT_S),
        )

    def is_idle(self, horizon_ms: int | None = None) -> bool:
        """Nothing due by `horizon_ms` (default: now) is held, queued, running or unflushed, and
        nothing due by then waits in the store."""
        counts = self.counts()
        if counts.executing or counts.unflushed:
            return False
        if horizon_ms is None:
            horizon_ms = self.ctx.clock.now_ms()
            if counts.due_held:
                return False
        elif counts.scheduled:
            return False
        return self.ctx.store.count_due(self.ctx.partition, horizon_ms) == 0

    def shut_down(self, deadline: StopDeadline | float, reason: str) -> None:
        """Stop the tree: running attempts get until `deadline` to finish, then are cancelled
        (their tasks go back to pending for the partition's next owner, see PartitionExecutor)."""
        if not isinstance(deadline, StopDeadline):
            deadline = StopDeadline(deadline)
        for stop in (self._persistence.stop_loading, self._executor.stop_scheduling):
            _quietly(lambda stop=stop: stop().get(timeout=10))
        try:
            idle = self._executor.begin_drain().get(timeout=10)
            if not deadline.wait_for(idle):
                keys = self._executor.cancel_running(reason).get(timeout=10)
                if keys:
                    self.ctx.log.warning(
                        "%s: cancelled %s (%s); their tasks run again on the "
                        "partition's next owner: %s",
                        "stop forced"
                        if deadline.ended_early
                        else f"shutdown deadline of {deadline.seconds:g} s passed",
                        counted(len(keys), "running attempt"),
                        describe_keys(keys),
                        reason,
                    )
                idle.wait(CANCEL_GRACE_S)
        except pykka.ActorDeadError:
            pass
        for ref in self.refs:
            _quietly(lambda ref=ref: ref.stop(timeout=10))

    def running_keys(self) -> list[TaskKey]:
        """The tasks whose attempts run now."""
        keys: list[TaskKey] = self._executor.running_keys().get(timeout=ASK_TIMEOUT_S)
        return keys

    def on_failure(self, *exc_info: object) -> None:
        for ref in self.refs:
            _quietly(lambda ref=ref: ref.stop(block=False))


def _quietly(action: object) -> None:
    """Run a stop step, tolerating actors that already died (their failure is reported)."""
    try:
        action()  # type: ignore[operator]
    except (pykka.ActorDeadError, pykka.Timeout):
        pass
    except Exception:
        pass


def describe_keys(keys: list[TaskKey]) -> str:
    """The first KEY_SHOWN keys in the printed form, and how many more."""
    shown = ", ".join(str(key) for key in sorted(keys)[:KEYS_SHOWN])
    more = len(keys) - KEYS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")
