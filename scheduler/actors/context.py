"""What every actor of one partition's tree shares: the partition, its backends and settings."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.actors.unflushed import UnflushedStatuses
from scheduler.actors.unwritten import UnwrittenRows
from scheduler.engine.clock import Clock
from scheduler.engine.executor_service import TaskExecutorService
from scheduler.engine.lease import ALWAYS_HELD, Lease
from scheduler.engine.outage import Backoff, StoreProbe
from scheduler.engine.reload_mark import MarkHolder
from scheduler.engine.settings import EngineSettings
from scheduler.engine.timers import TimerService
from scheduler.executors.abc import Executor
from scheduler.stores.abc import TaskStore


@dataclass(slots=True)
class HeldCounts:
    """The tasks a partition's PartitionScheduler and PartitionExecutor hold, and those on their
    way to them: TaskPersistence reads it instead of asking the executor (an ask per top-up
    delayed every persist). Each field has one writer."""

    scheduled: int = 0
    """Held by the PartitionScheduler (not yet due)."""
    executing: int = 0
    """Held by the PartitionExecutor (queued, running or waiting to retry): its own count."""
    handed: int = 0
    """Tasks TaskPersistence has sent the PartitionExecutor so far (its writer)."""
    taken: int = 0
    """Of those, how many the PartitionExecutor has taken in (its writer), added once
    `scheduled` and `executing` count them."""

    @property
    def total(self) -> int:
        """Held, plus sent and not yet taken in (the executor's mailbox)."""
        return self.scheduled + self.executing + self.handed - self.taken


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionContext:
    """Constructor arguments common to a partition's actors."""

    partition: int
    """The log partition this tree owns."""
    generation: int
    """Incremented on every (re)start, so late messages of a dead tree can be recognised."""
    store: TaskStore
    """Schedule and status rows."""
    executor: Executor
    """Runs one attempt of a task."""
    executor_service: TaskExecutorService
    """The worker's bounded pool."""
    timers: TimerService
    """The worker's timer thread, and through it the worker's clock."""
    settings: EngineSettings
    """Engine settings."""
    report_failure: Callable[[int, int, BaseException], None]
    """Called with (partition, generation, error) when an actor of the tree dies."""
    rng: random.Random = field(default_factory=random.Random)
    """Jitter source (seedable in tests)."""
    held: HeldCounts = field(default_factory=HeldCounts)
    """What the tree's scheduler and executor hold (shared; see `HeldCounts`)."""
    mark: MarkHolder = field(default_factory=MarkHolder)
    """Where the partition's next owner starts reading the store (see `reload_mark`)."""
    unflushed: UnflushedStatuses = field(default_factory=UnflushedStatuses)
    """Status changes not yet in the store, kept across restarts (see `unflushed`)."""
    unwritten: UnwrittenRows = field(default_factory=UnwrittenRows)
    """Batches the store took only in part, kept across restarts (see `unwritten`)."""
    worker_id: str = ""
    """The worker running the tree (its client id), kept in each attempt's record."""
    lease: Lease = ALWAYS_HELD
    """The worker's lease on its partitions: no attempt starts while it is not held."""

    @property
    def clock(self) -> Clock:
        """The worker's one clock: every reading of time in the tree."""
        return self.timers.clock

    def store_probe(self, what: str, on_change: Callable[[str, bool], object]) -> StoreProbe:
        """The OUTAGE state of one kind of this partition's store calls (`engine.outage`)."""
        backoff = Backoff(self.settings.restart_backoff_s)
        return StoreProbe(what, self.partition, backoff, self.clock, on_change)

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        return logging.LoggerAdapter(
            logging.getLogger("scheduler.partition"), {"partition": self.partition}
        )
