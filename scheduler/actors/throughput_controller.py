"""ThroughputController: loads more of the schedule only while in-flight work is under a bound.

However large the backlog in the store, a partition holds at most `max_in_flight_per_partition`
tasks in memory. The controller tops the partition up on a timer (to pull the next lookahead
window as time moves on) and when the PartitionExecutor reports that it drained below half the
bound while rows were left behind (a backlog draining at full speed). Every few seconds it also
moves the partition's reload mark forward.

It is a plain object owned by the TaskPersistence actor, which does the loads it decides: a
decision needs no thread of its own, and a load needs no message between two actors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import pykka

from scheduler import metrics
from scheduler.actors.context import PartitionContext
from scheduler.engine.messages import TasksLoaded
from scheduler.engine.outage import Backoff, StoreProbe
from scheduler.engine.timers import TimerHandle
from scheduler.errors import BackendUnavailableError

if TYPE_CHECKING:
    from scheduler.actors.partition_executor import PartitionExecutor

MARK_INTERVAL_S = 5.0
"""How often the partition's reload mark is moved forward (the worker commits it when it
changes; see `engine.reload_mark`)."""


class ThroughputController:
    """Decides when TaskPersistence loads the next slice of the schedule, and how much."""

    def __init__(
        self,
        ctx: PartitionContext,
        *,
        load: Callable[[int, int], TasksLoaded],
        advance_mark: Callable[[], None],
        executor: pykka.ActorProxy[PartitionExecutor],
        wake: Callable[[], None],
    ) -> None:
        self.ctx = ctx
        self._load = load
        """Loads (until_ms, limit) rows: TaskPersistence.load, on the same thread."""
        self._advance_mark = advance_mark
        self._executor = executor
        """The PartitionExecutor, told to notify when it drained (`notify_when_at_most`)."""
        self._wake = wake
        """Called on the timer thread when the next top-up is due: has the owner call `tick`."""
        self.timer: TimerHandle | None = None
        self.backlogged = True  # until the first load says otherwise
        self.reported_in_flight = 0
        self.stopped = False
        self._mark_due = ctx.clock.monotonic() + MARK_INTERVAL_S
        self.outage = StoreProbe(
            "schedule reads",
            ctx.partition,
            Backoff(ctx.settings.restart_backoff_s),
            ctx.clock,
            logging.getLogger("scheduler.partition"),
        )
        """Whether the store refuses the partition's loads; while it does, the next tick is the
        store's probe and the PartitionExecutor starts nothing."""

    def tick(self) -> None:
        """Top the partition up if it has room, then re-arm the periodic timer; a store that
        refuses the load puts the partition in OUTAGE until a later tick's load succeeds."""
        if self.stopped or not self.outage.due():
            return  # in an outage, only the probe's timer ticks
        try:
            self._top_up()
        except BackendUnavailableError as error:
            delay = self.outage.refused(error)
            self._executor.store_outage.defer(self.outage.what, True)
            self._arm(delay)
            return
        if self.outage.answered():
            self._executor.store_outage.defer(self.outage.what, False)
        self._arm()

    def _top_up(self) -> None:
        settings = self.ctx.settings
        bound = settings.max_in_flight_per_partition
        # Read from the published counts, not asked: see `HeldCounts`.
        in_flight = self.ctx.held.total
        room = bound - in_flight
        # Small top-ups while a backlog drains would mean a store query per handful of tasks.
        if room > 0 and (not self.backlogged or room >= bound // 2):
            loaded = self._load(self.ctx.clock.now_ms() + settings.lookahead_ms, room)
            self.backlogged = not loaded.exhausted
            in_flight += loaded.count
        if self.backlogged:
            self._executor.notify_when_at_most.defer(bound // 2)
        if self.ctx.clock.monotonic() >= self._mark_due:
            self._mark_due = self.ctx.clock.monotonic() + MARK_INTERVAL_S
            self._advance_mark()
        metrics.IN_FLIGHT.inc(in_flight - self.reported_in_flight)
        self.reported_in_flight = in_flight

    def _arm(self, delay_s: float | None = None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if delay_s is None:
            delay_s = self.ctx.settings.load_interval_ms / 1000
        self.timer = self.ctx.timers.call_later(delay_s, self._wake)

    def stop_loading(self) -> None:
        self.stopped = True
        if self.timer is not None:
            self.timer.cancel()

    def close(self) -> None:
        """The owner stops: no more ticks, and the in-flight gauge gives back this partition's."""
        self.stop_loading()
        metrics.IN_FLIGHT.dec(self.reported_in_flight)
        self.reported_in_flight = 0
