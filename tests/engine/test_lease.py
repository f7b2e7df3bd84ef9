"""The worker's lease: after a pause past the session timeout, no attempt starts until the poll
loop has heard from the group (issue 45's `worker-pause` finding)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from scheduler.engine.clock import SteppedClock
from scheduler.engine.lease import ALWAYS_HELD, Lease, lease_term_s
from scheduler.engine.messages import AttemptFinished, AttemptStarted, ScheduledTask
from scheduler.engine.task_executor import NOT_STARTED, TaskExecutor
from scheduler.model import Task
from scheduler.testing import TEST_SETTINGS
from tests.engine.helpers import Recorder, SteppedEngine


class RealClock:
    """A stand-in for `time.monotonic` that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_holds_while_its_last_stamp_is_younger_than_its_term():
    clock = SteppedClock()
    lease = Lease(term_s=8, settle_s=2, clock=clock, real_monotonic=RealClock())
    clock.advance(8)
    assert lease.held()
    lease.confirm()
    clock.advance(7.9)
    assert lease.held()
    clock.advance(0.2)
    assert not lease.held()


def test_a_stamp_after_a_lapse_holds_the_lease_only_once_the_polls_have_settled():
    clock, real = SteppedClock(), RealClock()
    lease = Lease(term_s=8, settle_s=2, clock=clock, real_monotonic=real)
    woken = threading.Event()
    clock.advance(15)  # the process was stopped past the session timeout
    lease.when_held(woken.set)
    lease.confirm()  # the first poll after the pause: the revocation may not have come yet
    assert not lease.held() and not woken.is_set()
    real.now = 1.9
    lease.confirm()
    assert not lease.held() and not woken.is_set()
    real.now = 2.0
    lease.confirm()
    assert lease.held() and woken.is_set()


def test_a_log_without_group_sessions_always_holds_the_lease():
    clock = SteppedClock()
    lease = Lease(term_s=None, clock=clock)
    clock.advance(3600)
    assert lease.held() and ALWAYS_HELD.held()


def test_a_lease_term_must_be_positive_and_says_what_to_give():
    with pytest.raises(ValueError, match="session timeout minus a margin"):
        Lease(term_s=0)


def test_the_term_lapses_two_heartbeats_before_the_session_and_never_under_half_of_it():
    assert lease_term_s(10, 1) == 8
    assert lease_term_s(10, 3) == 5


def test_a_due_task_does_not_start_on_a_lapsed_lease_and_starts_once_the_poll_loop_settles(
    data_dir,
):
    recorder = Recorder()
    clock, real = SteppedClock(), RealClock()
    lease = Lease(term_s=8, settle_s=1, clock=clock, real_monotonic=real)
    with SteppedEngine(
        recorder, clock=clock, lease=lease, partitions=4, data_dir=data_dir
    ) as engine:
        task = Task("account-1", engine.at(5000), "after-the-pause")
        engine.client.schedule_task(task).result(timeout=10)
        engine.wait_persisted(time.monotonic() + 30)
        # The worker "was stopped" for 9 s: its last stamp is older than the 8 s term when the
        # timers fire the task that fell due meanwhile.
        clock.advance(9)
        # The poll loop goes on polling, but real time stands still: the lease stays settling.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert not recorder.started[task.key].is_set(), "started on a lapsed lease"
            time.sleep(0.02)
        assert not lease.held()
        real.now = 1.0  # a heartbeat's worth of polls later: the group kept the partition
        assert recorder.started[task.key].wait(10)
        engine.join()
    assert recorder.keys() == [task.key]


def test_an_attempt_whose_lease_lapsed_in_the_pools_queue_is_refused_and_not_recorded():
    """The pool thread checks the lease right before the executor call: an attempt handed over
    while the lease held, whose lease lapsed before a thread took it, never begins."""
    clock = SteppedClock()
    lease = Lease(term_s=8, settle_s=1, clock=clock, real_monotonic=RealClock())
    reports: list[AttemptStarted | AttemptFinished] = []
    calls: list[Task] = []
    queued: list = []

    class Pool:
        def submit(self, call):
            queued.append(call)

    item = ScheduledTask(Task("account-1", datetime.now(UTC), "t"), 0, None, 0)
    attempt = TaskExecutor(item, partition=0, report=reports.append, clock=clock, lease=lease)
    assert lease.held()
    attempt.start(lambda task, ctx: calls.append(task), Pool(), None, None)  # type: ignore[arg-type]
    clock.advance(9)  # stopped while the call waited for a thread
    (call,) = queued
    call()
    assert calls == []
    (finished,) = reports
    assert isinstance(finished, AttemptFinished)
    assert finished.cancelled == NOT_STARTED and finished.started_ms is None


def test_a_task_handed_to_the_pool_before_a_pause_starts_only_once_the_lease_holds_again(
    data_dir,
):
    recorder = Recorder()
    recorder.block = lambda task: task.uniqueness_key == "blocker"
    clock, real = SteppedClock(), RealClock()
    lease = Lease(term_s=8, settle_s=1, clock=clock, real_monotonic=real)
    settings = replace(TEST_SETTINGS, pool_size=1)
    with SteppedEngine(
        recorder, clock=clock, lease=lease, partitions=4, data_dir=data_dir, settings=settings
    ) as engine:
        blocker = Task("account-0", engine.at(1000), "blocker")
        task = Task("account-1", engine.at(2000), "after-the-pause")
        for t in (blocker, task):
            engine.client.schedule_task(t).result(timeout=10)
        engine.wait_persisted(time.monotonic() + 30)
        clock.advance(1)
        assert recorder.started[blocker.key].wait(10)  # the pool's one thread is taken
        clock.advance(1)
        service = engine.worker.executor_service
        deadline = time.monotonic() + 10
        while service.queued == 0:  # handed over while the lease held
            assert time.monotonic() < deadline, "the due task never reached the pool"
            time.sleep(0.01)
        clock.advance(9)  # the worker "was stopped" past its lease with the task in the queue
        recorder.release.set()  # the thread is free: without the check it starts the task now
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert not recorder.started[task.key].is_set(), "started on a lapsed lease"
            time.sleep(0.02)
        real.now = 1.0  # the poll loop settled: the group kept the partition
        assert recorder.started[task.key].wait(10)
        engine.join()
    runs = [(key, attempt) for key, attempt, _ in recorder.calls if key == task.key]
    assert runs == [(task.key, 1)]  # the refused hand-off was not counted as an attempt
