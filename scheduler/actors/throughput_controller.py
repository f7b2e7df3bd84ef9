"""ThroughputController: loads more of the schedule only while in-flight work is under a bound.

However large the backlog in the store, a partition holds at most `max_in_flight_per_partition`
tasks in memory. The controller tops the partition up on a timer (to pull the next lookahead
window as time moves on) and when the PartitionExecutor reports that it drained below half the
bound while rows were left behind (a backlog draining at full speed). Every few seconds it also
has TaskPersistence move the partition's reload mark forward.
"""

from __future__ import annotations

import pykka

from scheduler import metrics
from scheduler.actors.base import ASK_TIMEOUT_S, PartitionActor
from scheduler.actors.context import PartitionContext
from scheduler.engine.timers import TimerHandle

MARK_INTERVAL_S = 5.0
"""How often the partition's reload mark is moved forward (the worker commits it when it
changes; see `engine.reload_mark`)."""


class ThroughputController(PartitionActor):
    """Decides when TaskPersistence loads the next slice of the schedule, and how much."""

    def __init__(
        self,
        ctx: PartitionContext,
        persistence: pykka.ActorProxy,
        scheduler: pykka.ActorProxy,
        executor: pykka.ActorProxy,
    ) -> None:
        super().__init__(ctx)
        self._persistence = persistence
        self._scheduler = scheduler
        self._executor = executor
        self.timer: TimerHandle | None = None
        self.backlogged = True  # until the first load says otherwise
        self.reported_in_flight = 0
        self.stopped = False
        self._me: pykka.ActorProxy | None = None
        self._mark_due = self.ctx.clock.monotonic() + MARK_INTERVAL_S

    def on_start(self) -> None:
        self._me = self.actor_ref.proxy()

    def begin(self) -> None:
        """Start loading and ticking, once the whole tree is up. Not from `on_start`: a store
        that fails the first load at once would kill this actor before its supervisor had even
        taken its proxy, and with it the supervisor's start."""
        self.tick()

    def tick(self) -> None:
        """Top the partition up if it has room, then re-arm the periodic timer."""
        if self.stopped:
            return
        settings = self.ctx.settings
        bound = settings.max_in_flight_per_partition
        held, _ = self._scheduler.counts().get(timeout=ASK_TIMEOUT_S)
        executing, _ = self._executor.counts().get(timeout=ASK_TIMEOUT_S)
        in_flight = held + executing
        room = bound - in_flight
        # Small top-ups while a backlog drains would mean a store query per handful of tasks.
        if room > 0 and (not self.backlogged or room >= bound // 2):
            loaded = self._persistence.load(
                self.ctx.clock.now_ms() + settings.lookahead_ms, room
            ).get(timeout=ASK_TIMEOUT_S)
            self.backlogged = not loaded.exhausted
            in_flight += loaded.count
        if self.backlogged:
            self._executor.notify_when_at_most.defer(bound // 2)
        if self.ctx.clock.monotonic() >= self._mark_due:
            self._mark_due = self.ctx.clock.monotonic() + MARK_INTERVAL_S
            self._persistence.advance_mark.defer()
        metrics.IN_FLIGHT.inc(in_flight - self.reported_in_flight)
        self.reported_in_flight = in_flight
        self._arm()

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        me = self._me
        assert me is not None
        self.timer = self.ctx.timers.call_later(
            self.ctx.settings.load_interval_ms / 1000, lambda: me.tick.defer()
        )

    def stop_loading(self) -> None:
        self.stopped = True
        if self.timer is not None:
            self.timer.cancel()

    def on_stop(self) -> None:
        self.stop_loading()
        metrics.IN_FLIGHT.dec(self.reported_in_flight)
        self.reported_in_flight = 0
