"""ThroughputController: loads more of the schedule only while in-flight work is under a bound.

A partition holds at most `max_in_flight_per_partition` tasks in memory, however large the
backlog. The controller tops it up on a timer (the next lookahead window) and when the
PartitionExecutor drained below half the bound while rows were left behind; every few seconds
it moves the reload mark forward. A plain object of TaskPersistence, which does the loads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler import metrics
from scheduler.actors.context import PartitionContext
from scheduler.engine.timers import TimerHandle
from scheduler.errors import BackendUnavailableError

if TYPE_CHECKING:
    from scheduler.actors.partition_executor import PartitionExecutorProxy

MARK_INTERVAL_S = 5.0
"""How often the partition's reload mark is moved forward (the worker commits it when it
changes; see `engine.reload_mark`)."""


class ThroughputController:
    """Decides when TaskPersistence loads the next slice of the schedule, and how much."""

    def __init__(
        self,
        ctx: PartitionContext,
        *,
        load: Callable[[int, int], tuple[int, bool]],
        advance_mark: Callable[[], None],
        executor: PartitionExecutorProxy,
        wake: Callable[[], None],
    ) -> None:
        self.ctx = ctx
        self._load = load
        self._advance_mark = advance_mark
        self._executor = executor
        self._wake = wake
        """Called on the timer thread when the next top-up is due (the owner calls `tick`)."""
        self.timer: TimerHandle | None = None
        self.backlogged = True  # until the first load says otherwise
        self.reported_in_flight = 0
        self.stopped = False
        self._mark_due = ctx.clock.monotonic() + MARK_INTERVAL_S
        self.outage = ctx.store_probe("schedule reads", self._tell_executor)
        """While the store refuses loads, the next tick is its probe."""

    def _tell_executor(self, what: str, down: bool) -> None:
        self._executor.store_outage.defer(what, down)

    def tick(self) -> None:
        """Top the partition up if it has room, then re-arm the timer (OUTAGE on a refusal)."""
        if self.stopped or not self.outage.due():
            return  # in an outage, only the probe's timer ticks
        try:
            self._top_up()
        except BackendUnavailableError as error:
            self._arm(self.outage.refused(error))
            return
        self.outage.answered()
        self._arm()

    def _top_up(self) -> None:
        settings = self.ctx.settings
        bound = settings.max_in_flight_per_partition
        in_flight = self.ctx.held.total
        room = bound - in_flight
        # Small top-ups while a backlog drains would mean a store query per handful of tasks.
        if room > 0 and (not self.backlogged or room >= bound // 2):
            count, exhausted = self._load(self.ctx.clock.now_ms() + settings.lookahead_ms, room)
            self.backlogged = not exhausted
            in_flight += count
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
