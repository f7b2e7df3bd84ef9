"""TopicSupervisor: the top of the actor system; one PartitionSupervisor per owned partition.

It starts and stops partition trees as the worker gains and loses partitions, routes each
polled batch to the partitions' TaskPersistence actors, and restarts a partition whose tree
failed on a bug (a store that is down is an OUTAGE, `engine.outage`, and the tree stays up). A
restart rebuilds the tree from the store; a batch the dead tree did not store failed its future,
and the worker holds it for the new tree.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pykka

from scheduler import metrics
from scheduler.actors.context import PartitionContext
from scheduler.actors.partition_supervisor import (
    PartitionSupervisor,
    shut_down_all,
    shut_down_in_background,
)
from scheduler.actors.typed_proxy import ActorMemberMixin, proxy_method, typed_proxy
from scheduler.actors.unflushed import UnflushedStatuses
from scheduler.actors.unwritten import UnwrittenRows
from scheduler.codec import Command
from scheduler.engine.deadline import StopDeadline
from scheduler.engine.executor_service import TaskExecutorService
from scheduler.engine.lease import ALWAYS_HELD, Lease
from scheduler.engine.messages import PartitionCounts
from scheduler.engine.outage import MAX_BACKOFF_S, Backoff
from scheduler.engine.reload_mark import MarkHolder, ReloadMark
from scheduler.engine.repeats import RepeatedFailures
from scheduler.engine.settings import EngineSettings
from scheduler.engine.timers import TimerService
from scheduler.executors.abc import Executor
from scheduler.model import TaskKey
from scheduler.stores.abc import TaskStore

logger = logging.getLogger(__name__)

#: Upper bound of the delay before restarting a partition that keeps failing.
MAX_RESTART_BACKOFF_S = MAX_BACKOFF_S
#: A partition that ran this long without failing is restarted after the base delay again.
STABLE_AFTER_S = 60.0
#: How often a partition due to restart looks whether its failed tree is down yet.
DYING_LOOK_S = 0.1
#: Failures kept, with their tracebacks, for `failures_so_far`; later ones are only counted and
#: logged (a traceback holds the dead tree's actors alive).
KEPT_FAILURES = 20


@dataclass(frozen=True, slots=True)
class PartitionFailure:
    """A partition's actor tree died."""

    partition: int
    generation: int
    """Which incarnation of its tree."""
    error: BaseException


class TopicSupervisor(pykka.ThreadingActor):
    """Starts, feeds, restarts and stops the partition trees of one worker."""

    def __init__(
        self,
        *,
        store: TaskStore,
        executor: Executor,
        executor_service: TaskExecutorService,
        timers: TimerService,
        settings: EngineSettings,
        rng: random.Random | None = None,
        restarting: set[int] | None = None,
        worker_id: str = "",
        lease: Lease = ALWAYS_HELD,
    ) -> None:
        super().__init__()
        self._context = functools.partial(
            PartitionContext,
            store=store,
            executor=executor,
            executor_service=executor_service,
            timers=timers,
            settings=settings,
            worker_id=worker_id,
            lease=lease,
        )
        """Makes a partition's context from what every partition shares."""
        self.timers = timers
        self.settings = settings
        self.rng = rng or random.Random()
        self.trees: dict[int, PartitionSupervisor] = {}
        self.generations: dict[int, int] = {}
        self.failures: list[PartitionFailure] = []
        """The first KEPT_FAILURES failures since start."""
        self.repeats = RepeatedFailures(
            logger,
            "partitions {partitions} failed again {count} times in the last {seconds:.0f} s "
            "(the latest: {error}); each is restarted from the store every "
            f"{MAX_RESTART_BACKOFF_S:g} s at most while it fails, and nothing is lost meanwhile",
        )
        self.restarting: set[int] = set() if restarting is None else restarting
        """Partitions whose tree failed and waits for its restart; the worker's set, which its
        probes copy from another thread without asking this actor."""
        self.streaks: dict[int, int] = {}
        self.started_at: dict[int, float] = {}
        self.marks: dict[int, MarkHolder] = {}
        self.unflushed: dict[int, UnflushedStatuses] = {}
        """Per partition, status changes not written yet: kept across restarts."""
        self.unwritten: dict[int, UnwrittenRows] = {}
        """Per partition, the batches the store took in part: kept across restarts."""
        self.dying: dict[int, threading.Event] = {}
        """Per partition, its failed tree going down (set once down). Only its next tree waits
        for it: waiting here would hold this actor, which the poll loop asks every batch."""

    def on_start(self) -> None:
        self._me = typed_proxy(self.actor_ref, TopicSupervisorProxy)

    # -- assignment ---------------------------------------------------------------------------

    def assign(
        self, partitions: Iterable[int], marks: Mapping[int, ReloadMark | None] | None = None
    ) -> dict[int, MarkHolder]:
        """Start trees for these partitions, each from its committed reload mark; returns each
        partition's mark holder, which the worker commits with its offsets."""
        holders: dict[int, MarkHolder] = {}
        for partition in partitions:
            self.restarting.discard(partition)
            if partition in self.dying:  # a failed tree of it still going down: not beside it
                self.dying.pop(partition).wait(self.settings.shutdown_deadline_s + 30)
            if partition not in self.trees:
                self.marks[partition] = MarkHolder((marks or {}).get(partition))
                self._start(partition)
            holders[partition] = self.marks[partition]
        metrics.PARTITIONS_OWNED.set(len(self.trees))
        return holders

    def revoke(
        self, partitions: Iterable[int], deadline: StopDeadline | float, reason: str
    ) -> None:
        """Stop these partitions' trees in parallel (failed ones going down included); returns
        when all are down. Running attempts get until `deadline`."""
        if not isinstance(deadline, StopDeadline):
            deadline = StopDeadline(deadline)
        stopping, dying = [], []
        for partition in partitions:
            self.restarting.discard(partition)
            tree = self.trees.pop(partition, None)
            self.marks.pop(partition, None)
            self.unflushed.pop(partition, None)
            self.unwritten.pop(partition, None)
            if tree is not None:
                stopping.append(tree)
            if partition in self.dying:
                dying.append(self.dying.pop(partition))
        try:
            shut_down_all(stopping, deadline, reason)
        except Exception:  # the trees go down regardless; raised, it would stop every partition
            logger.exception("stopping partitions failed (%s)", reason)
        for down in dying:
            down.wait(deadline.remaining() + 30)
        metrics.PARTITIONS_OWNED.set(len(self.trees))

    def owned(self) -> list[int]:
        return sorted(self.trees)

    def running_keys(self) -> list[TaskKey]:
        """The tasks whose attempts run now, in every owned partition."""
        futures = []
        for tree in self.trees.values():
            try:
                futures.append(tree.executor.running_keys())
            except pykka.ActorDeadError:
                pass  # a partition failing: it says what it cancels itself
        keys: list[TaskKey] = []
        for future in futures:
            try:
                keys += future.get(timeout=10)
            except (pykka.ActorDeadError, pykka.Timeout):
                pass  # a partition failing or busy: it says what it cancels itself
        return sorted(keys)

    # -- work ---------------------------------------------------------------------------------

    def persist(
        self, batches: Mapping[int, Sequence[Command]], last_offsets: Mapping[int, int]
    ) -> dict[int, pykka.Future[int]]:
        """Hand each partition its commands (read up to `last_offsets`); the futures resolve
        once they are stored."""
        return {
            p: self.trees[p].persistence.persist(commands, last_offsets[p])
            for p, commands in batches.items()
            if p in self.trees  # else revoked meanwhile: the next owner reads it from the log
        }

    def counts(self) -> dict[int, PartitionCounts]:
        return {p: tree.counts() for p, tree in self.trees.items()}

    def is_idle(self, horizon_ms: int | None = None) -> bool:
        """See `PartitionSupervisor.is_idle`; False while a partition is restarting."""
        if self.restarting:
            return False
        try:
            return all(tree.is_idle(horizon_ms) for tree in self.trees.values())
        except pykka.ActorDeadError:
            return False  # a partition is failing; its restart is on the way

    # -- failures -------------------------------------------------------------------------------

    def partition_failed(self, partition: int, generation: int, error: BaseException) -> None:
        """An actor of a partition's tree died: rebuild that partition, leave the others alone."""
        tree = self.trees.get(partition)
        if tree is None or tree.ctx.generation != generation:
            return  # already restarted, or no longer ours
        del self.trees[partition]
        # Its marks, unflushed statuses and unwritten rows stay: the next tree goes on from them.
        reason = "partition restarting after a failure"
        self.dying[partition] = shut_down_in_background(tree, reason)
        metrics.PARTITIONS_OWNED.set(len(self.trees))
        self._restart_later(partition, generation, error)

    def _restart_later(self, partition: int, generation: int, error: BaseException) -> None:
        """Keep, count and log the failure, and restart the partition after a delay that grows
        while it keeps failing (from the base again once it ran `STABLE_AFTER_S`)."""
        if len(self.failures) < KEPT_FAILURES:
            self.failures.append(PartitionFailure(partition, generation, error))
        metrics.PARTITION_RESTARTS.inc()
        self.restarting.add(partition)
        if self.timers.clock.monotonic() - self.started_at.get(partition, 0.0) > STABLE_AFTER_S:
            self.streaks[partition] = 0
        streak = self.streaks[partition] = self.streaks.get(partition, 0) + 1
        if streak == 1:
            logger.error(
                "partition %d failed (%s: %s); restarting it from the store",
                partition,
                type(error).__name__,
                error,
                extra={"partition": partition},
            )
        else:
            self.repeats.failed_again(partition, error)
        delay = Backoff(self.settings.restart_backoff_s, MAX_RESTART_BACKOFF_S).delay(streak)
        me = self._me
        self.timers.call_later(delay, lambda: me.restart.defer(partition))

    def restart(self, partition: int) -> None:
        if partition not in self.restarting or partition in self.trees:
            return  # revoked or re-assigned while waiting to restart
        dying = self.dying.get(partition)
        if dying is not None and not dying.is_set():
            me = self._me  # the failed tree is still finishing a call: look again soon
            self.timers.call_later(DYING_LOOK_S, lambda: me.restart.defer(partition))
            return
        self.dying.pop(partition, None)
        self.restarting.discard(partition)
        self._start(partition)
        metrics.PARTITIONS_OWNED.set(len(self.trees))

    def failures_so_far(self) -> list[PartitionFailure]:
        return list(self.failures)

    def _start(self, partition: int) -> None:
        """Start a tree for `partition` (one that fails to start is restarted later)."""
        self.started_at[partition] = self.timers.clock.monotonic()
        generation = self.generations.get(partition, 0) + 1
        self.generations[partition] = generation
        me = self._me

        def report(p: int, g: int, error: BaseException) -> None:
            try:
                me.partition_failed.defer(p, g, error)
            except pykka.ActorDeadError:
                pass

        ctx = self._context(
            partition=partition,
            generation=generation,
            report_failure=report,
            rng=random.Random(self.rng.random()),
            mark=self.marks.setdefault(partition, MarkHolder()),
            unflushed=self.unflushed.setdefault(partition, UnflushedStatuses()),
            unwritten=self.unwritten.setdefault(partition, UnwrittenRows()),
        )
        supervisor = PartitionSupervisor(ctx)
        try:
            supervisor.start()
        except Exception as error:
            # Raised here, it would kill every partition of the worker.
            self._restart_later(partition, generation, error)
            return
        self.trees[partition] = supervisor

    def on_stop(self) -> None:
        owned = {*self.trees, *self.dying}
        self.revoke(sorted(owned), self.settings.shutdown_deadline_s, "worker stopping")


class TopicSupervisorProxy(ActorMemberMixin, pykka.ActorProxy[TopicSupervisor]):
    """What the worker's poll loop and the partitions' failure reports send it."""

    assign = proxy_method(TopicSupervisor.assign)
    revoke = proxy_method(TopicSupervisor.revoke)
    owned = proxy_method(TopicSupervisor.owned)
    running_keys = proxy_method(TopicSupervisor.running_keys)
    persist = proxy_method(TopicSupervisor.persist)
    counts = proxy_method(TopicSupervisor.counts)
    is_idle = proxy_method(TopicSupervisor.is_idle)
    partition_failed = proxy_method(TopicSupervisor.partition_failed)
    restart = proxy_method(TopicSupervisor.restart)
    failures_so_far = proxy_method(TopicSupervisor.failures_so_far)
