"""The ThroughputController's top-ups, on the counts the partition's actors publish."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.actors.context import PartitionContext
from scheduler.actors.throughput_controller import ThroughputController
from scheduler.engine.clock import SteppedClock
from scheduler.engine.executor_service import TaskExecutorService
from scheduler.engine.settings import EngineSettings
from scheduler.engine.timers import TimerService

BOUND = 100


class Deferred:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def defer(self, *args: Any) -> None:
        self.calls.append(args)


class TellOnlyExecutor:
    """A PartitionExecutor proxy that takes messages but fails every ask: the controller must
    not block its owner (TaskPersistence, which the poll loop waits for) on the executor."""

    def __init__(self) -> None:
        self.notify_when_at_most = Deferred()

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the controller asked the executor for {name}")


@pytest.fixture
def ctx() -> Iterator[PartitionContext]:
    timers = TimerService(clock=SteppedClock())
    service = TaskExecutorService(1)
    try:
        yield PartitionContext(
            partition=0,
            generation=1,
            store=None,  # type: ignore[arg-type]  # the controller never reads the store
            executor=lambda task, context: None,
            executor_service=service,
            timers=timers,
            settings=EngineSettings(max_in_flight_per_partition=BOUND),
            report_failure=lambda partition, generation, error: None,
        )
    finally:
        timers.stop()
        service.shutdown()


def controller_loading(ctx: PartitionContext, loads: list[int], count: int) -> ThroughputController:
    def load(until_ms: int, limit: int) -> tuple[int, bool]:
        loads.append(limit)
        return count, count < limit

    return ThroughputController(
        ctx, load=load, advance_mark=lambda: None, executor=TellOnlyExecutor(), wake=lambda: None
    )


def test_a_top_up_loads_only_the_room_left_by_tasks_held_and_tasks_on_their_way(ctx):
    ctx.held.scheduled, ctx.held.executing = 10, 20
    ctx.held.handed, ctx.held.taken = 50, 35  # 15 sent, still in the executor's mailbox
    loads: list[int] = []
    controller = controller_loading(ctx, loads, count=0)
    controller.tick()
    assert loads == [BOUND - 10 - 20 - 15]
    controller.close()


def test_a_partition_full_with_tasks_on_their_way_loads_nothing_and_asks_to_be_told(ctx):
    ctx.held.handed = BOUND  # a whole bound sent, none taken in yet
    loads: list[int] = []
    controller = controller_loading(ctx, loads, count=0)
    controller.tick()
    assert loads == []
    executor = controller._executor
    assert executor.notify_when_at_most.calls == [(BOUND // 2,)]
    controller.close()
