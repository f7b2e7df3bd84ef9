"""PartitionSupervisor: builds one partition's actor tree and takes it down in order.

A plain object of the TopicSupervisor. A tree is two actors: the PartitionExecutor (started
first, so TaskPersistence gets its proxy) and TaskPersistence, whose first tick loads the
partition's incomplete tasks. Stopping is the seed's revocation choreography under a deadline:
stop loading and scheduling, let running attempts finish, cancel those left, then stop the
PartitionExecutor (which records what it leaves behind) and TaskPersistence last (which writes
the statuses still buffered). `shut_down_all` does this for many trees step by step, so a
revocation lasts as long as its slowest partition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pykka

from scheduler.actors.base import ASK_TIMEOUT_S
from scheduler.actors.context import PartitionContext
from scheduler.actors.partition_executor import PartitionExecutor, PartitionExecutorProxy
from scheduler.actors.task_persistence import TaskPersistence, TaskPersistenceProxy
from scheduler.actors.typed_proxy import typed_proxy
from scheduler.engine.deadline import StopDeadline
from scheduler.engine.messages import PartitionCounts
from scheduler.model import TaskKey
from scheduler.wording import counted

#: After cancelling, how long attempts get to notice before the partition is let go regardless.
CANCEL_GRACE_S = 5.0
#: How long each step of a stop waits for an actor's answer before naming it and going on.
STEP_TIMEOUT_S = 10.0
#: Keys named in a log line, at most; the rest are counted.
KEYS_SHOWN = 5


class PartitionSupervisor:
    """Owns the actor tree of one partition (a plain object: see the module's docstring)."""

    def __init__(self, ctx: PartitionContext) -> None:
        self.ctx = ctx
        self.refs: list[pykka.ActorRef[Any]] = []
        """The tree's actors in stop order: the executor first, the writer last."""

    def start(self) -> None:
        """Start the tree and its first load; if an actor fails to start, those started are
        stopped and the error raised."""
        ctx = self.ctx
        try:
            executor_ref = PartitionExecutor.start(ctx)
            self.refs.append(executor_ref)
            self.executor = typed_proxy(executor_ref, PartitionExecutorProxy)
            persistence_ref = TaskPersistence.start(ctx, self.executor)
            self.refs.append(persistence_ref)
            self.persistence = typed_proxy(persistence_ref, TaskPersistenceProxy)
            self.executor.attach_controller(self.persistence).get(timeout=ASK_TIMEOUT_S)
        except BaseException:
            for ref in self.refs:  # stopped without waiting
                try:
                    ref.stop(block=False)
                except Exception:  # an actor that already died: its failure is reported
                    pass
            raise
        # The first load, now that every actor is wired (not in TaskPersistence's `on_start`: a
        # failed first load would kill this start).
        self.persistence.tick.defer()

    def counts(self) -> PartitionCounts:
        scheduled_future = self.executor.scheduled_counts()
        counts_future = self.executor.counts()
        scheduled, due_held = scheduled_future.get(timeout=ASK_TIMEOUT_S)
        executing, running = counts_future.get(timeout=ASK_TIMEOUT_S)
        # Read here: asked, it would wait behind TaskPersistence's write.
        return PartitionCounts(scheduled, due_held, executing, running, len(self.ctx.unflushed))

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


def shut_down_all(
    trees: Sequence[PartitionSupervisor], deadline: StopDeadline, reason: str
) -> None:
    """Take these trees down together, each step asked of every tree before any answer is
    awaited: stop loading and scheduling, drain until `deadline`, cancel what is left and give
    it `CANCEL_GRACE_S`, then stop the actors in order. An actor that does not answer a step
    within STEP_TIMEOUT_S is named, and the stop goes on."""
    live = [tree for tree in trees if tree.refs]
    _step_all(
        [(t, "TaskPersistence (stop loading)", t.persistence.stop_loading) for t in live], reason
    )
    _step_all(
        [(t, "PartitionExecutor (stop scheduling)", t.executor.stop_scheduling) for t in live],
        reason,
    )
    draining = _step_all(
        [(t, "PartitionExecutor (drain)", t.executor.begin_drain) for t in live], reason
    )
    left = [(tree, idle) for tree, idle in draining if not deadline.wait_for(idle)]
    cancelling = _step_all(
        [
            (tree, "PartitionExecutor (cancel)", lambda t=tree: t.executor.cancel_running(reason))
            for tree, _ in left
        ],
        reason,
    )
    for tree, keys in cancelling:
        if keys:
            tree.ctx.log.warning(
                "%s: cancelled %s (%s); their tasks run again on the partition's next owner: %s",
                "stop forced"
                if deadline.ended_early
                else f"shutdown deadline of {deadline.seconds:g} s passed",
                counted(len(keys), "running attempt"),
                describe_keys(keys),
                reason,
            )
    grace_ends = time.monotonic() + CANCEL_GRACE_S
    for _tree, idle in left:
        idle.wait(max(0.0, grace_ends - time.monotonic()))
    for depth in range(max((len(tree.refs) for tree in live), default=0)):
        _step_all(
            [
                (tree, tree.refs[depth].actor_class.__name__, tree.refs[depth].stop)
                for tree in live
                if depth < len(tree.refs)
            ],
            reason,
            stop=True,
        )


def _step_all(
    steps: Sequence[tuple[PartitionSupervisor, str, Callable[..., Any]]],
    reason: str,
    *,
    stop: bool = False,
) -> list[tuple[PartitionSupervisor, Any]]:
    """Send one stop step to several trees' actors, then collect the answers within one
    STEP_TIMEOUT_S; returns the trees that answered, with their answers. One that does not
    answer in time is named in the log; one that died is skipped (its failure is reported)."""
    sent: list[tuple[PartitionSupervisor, str, pykka.Future[Any]]] = []
    for tree, name, action in steps:
        try:
            sent.append((tree, name, action(block=False) if stop else action()))
        except Exception:
            pass
    ends = time.monotonic() + STEP_TIMEOUT_S
    answered = []
    for tree, name, future in sent:
        try:
            answered.append((tree, future.get(timeout=max(0.0, ends - time.monotonic()))))
        except pykka.Timeout:
            tree.ctx.log.warning(
                "stopping (%s): %s did not answer within %g s (a store call that hangs?); the "
                "stop goes on without waiting for it",
                reason,
                name,
                STEP_TIMEOUT_S,
            )
        except Exception:
            pass
    return answered


def shut_down_in_background(tree: PartitionSupervisor, reason: str) -> threading.Event:
    """Take a failed tree down at once on a short-lived thread (its actors may be held in a
    store call); returns the event set once it is down."""
    down = threading.Event()

    def run() -> None:
        try:
            shut_down_all([tree], StopDeadline(0.0), reason)
        finally:
            down.set()

    threading.Thread(
        target=run, name=f"partition-{tree.ctx.partition}-stopping", daemon=True
    ).start()
    return down


def describe_keys(keys: list[TaskKey]) -> str:
    """The first KEY_SHOWN keys in the printed form, and how many more."""
    shown = ", ".join(str(key) for key in sorted(keys)[:KEYS_SHOWN])
    more = len(keys) - KEYS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")
