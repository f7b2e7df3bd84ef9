"""A task pushed behind the read checkpoint and a later task of its ordering id loaded before
it: the status look-up of the push is slow, and the later task falls due meanwhile. It must not
start before the pushed one (issue 45, the small inversions of docs/reliability.md)."""

from __future__ import annotations

import threading
import time
from typing import Any

from scheduler import Task
from scheduler.actors.partition_scheduler import PartitionScheduler
from scheduler.engine.clock import SteppedClock
from scheduler.engine.messages import ScheduledTask
from scheduler.engine.timers import TimerService
from scheduler.model import TaskKey
from scheduler.stores.abc import TaskStore
from tests.engine.helpers import Recorder, bare_context, stepped_engine
from tests.engine.test_failures_and_restarts import enqueue_all, ids_on_partition

PARTITION = 2


class SlowLookups:
    """Delegates to a real store; while `slow` is set, partition 2's status look-ups wait until
    it is cleared (a slow Cassandra node)."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self.slow = threading.Event()
        self.waiting = threading.Event()
        self.released = threading.Event()

    def fetch_statuses(self, partition: int, *args: Any, **kwargs: Any) -> Any:
        if partition == PARTITION and self.slow.is_set():
            self.waiting.set()
            self.released.wait(10)
        return self._store.fetch_statuses(partition, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def wait_for(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_loaded_task_does_not_start_before_an_earlier_one_whose_push_is_still_looking_up():
    recorder = Recorder()
    made: list[SlowLookups] = []

    def wrap(store: TaskStore) -> Any:
        made.append(SlowLookups(store))
        return made[0]

    (oid,) = ids_on_partition(PARTITION, 1)
    with stepped_engine(recorder, wrap_store=wrap) as engine:
        store = made[0]
        later = Task(oid, engine.at(3000), "later")
        enqueue_all(engine, [later])
        engine.join(include_future=False)
        # The clock moves until the later task is loaded (held by the scheduler, not due yet).
        for _ in range(20):
            engine.clock.advance(0.1)
            time.sleep(0.02)
        assert engine.worker.topic.counts().get()[PARTITION].scheduled == 1
        store.slow.set()
        earlier = Task(oid, engine.at(300), "earlier")  # behind the checkpoint: pushed
        enqueue_all(engine, [earlier])
        assert store.waiting.wait(10)
        # The later task falls due while the earlier one's push waits for its look-up.
        engine.clock.advance(1.5)
        wait_for(lambda: recorder.runs_of(oid), 1.0)
        store.released.set()
        store.slow.clear()
        engine.join()
    assert recorder.runs_of(oid) == [earlier.key, later.key]


def keep_back_scheduler(dispatched: list[TaskKey]) -> tuple[PartitionScheduler, TimerService]:
    """A PartitionScheduler on the system clock, whose tasks (due at epoch ms 1 to 3) are due."""
    timers = TimerService()
    ctx = bare_context(timers)
    scheduler = PartitionScheduler(
        ctx, lambda items: dispatched.extend(item.key for item in items), lambda: None
    )
    return scheduler, timers


def item(key: TaskKey) -> ScheduledTask:
    return ScheduledTask(Task.from_key(key, {}))


def test_a_due_task_behind_an_awaited_key_is_dispatched_with_it_and_after_it():
    dispatched: list[TaskKey] = []
    scheduler, timers = keep_back_scheduler(dispatched)
    first, second = TaskKey.from_ms("o", 1, "a"), TaskKey.from_ms("o", 2, "b")
    other, before = TaskKey.from_ms("p", 3, "c"), TaskKey.from_ms("o", 1, "0")
    try:
        scheduler.await_keys([first])
        scheduler.schedule([item(second), item(other), item(before)])
        assert set(dispatched) == {other, before}  # other ids, and earlier keys, are not held
        assert scheduler.counts() == (1, 1)
        scheduler.schedule([item(first)], [first])
        assert dispatched[2:] == [first, second]
        assert scheduler.counts() == (0, 0)
    finally:
        timers.stop()


def test_a_push_that_hands_nothing_on_releases_the_tasks_kept_back_and_cancels_are_kept():
    dispatched: list[TaskKey] = []
    scheduler, timers = keep_back_scheduler(dispatched)
    first = TaskKey.from_ms("o", 1, "a")
    second, third = TaskKey.from_ms("o", 2, "b"), TaskKey.from_ms("o", 3, "c")
    try:
        scheduler.await_keys([first])
        scheduler.schedule([item(second), item(third)])
        assert scheduler.cancel([third]) == []  # held here, so forgotten here
        scheduler.schedule([], [first])  # found final, or its look-up failed
        assert dispatched == [second]
        assert scheduler.counts() == (0, 0)
    finally:
        timers.stop()


def test_a_task_pushed_due_does_not_start_before_an_earlier_loaded_one_whose_timer_is_late():
    # The chaos round's inversion (cassandra-remote-kill, docs/reliability.md): the worker
    # stalled 0.7 s; when it went on, a push of tasks already due reached the scheduler before
    # the `fire` of the timer of earlier tasks of their ordering ids, loaded before.
    clock = SteppedClock(start_ms=10_000)
    timers = TimerService(clock=clock)
    ctx = bare_context(timers)
    dispatched: list[TaskKey] = []
    fired = threading.Event()
    scheduler = PartitionScheduler(
        ctx, lambda items: dispatched.extend(item.key for item in items), fired.set
    )
    loaded = TaskKey.from_ms("o", 10_845, "10200")
    other = TaskKey.from_ms("p", 10_900, "10201")
    pushed = TaskKey.from_ms("o", 11_048, "10220")
    try:
        scheduler.schedule([item(loaded), item(other)])
        assert dispatched == []
        clock.advance(1.5)  # the timer fires; its `fire` waits behind the push in the mailbox
        assert fired.wait(5)
        scheduler.schedule([item(pushed)], [pushed])
        assert set(dispatched) == {loaded, pushed, other}  # all due now: all go
        assert dispatched.index(loaded) < dispatched.index(pushed)
        scheduler.fire()  # the late `fire` finds nothing left to dispatch
        assert len(dispatched) == 3
        assert scheduler.counts() == (0, 0)
    finally:
        timers.stop()
