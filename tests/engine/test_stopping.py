"""Stopping a worker through the Python API: the deadline, stopping now, and what is left."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from scheduler import Task, TaskState
from scheduler.actors import partition_supervisor
from scheduler.engine.deadline import StopDeadline
from scheduler.model import AttemptOutcome
from scheduler.partitioning import partition_for
from scheduler.testing import TEST_SETTINGS, embedded_engine
from tests.engine.helpers import Recorder, soon

LONG_DEADLINE = replace(TEST_SETTINGS, shutdown_deadline_s=120.0)


def test_stop_now_cancels_running_attempts_at_once_and_leaves_them_pending(data_dir):
    recorder = Recorder()
    recorder.block = lambda task: True
    with embedded_engine(recorder, data_dir=data_dir, settings=LONG_DEADLINE) as engine:
        task = Task("o", soon(), "long")
        engine.client.schedule_task(task).result(timeout=10)
        assert recorder.started[task.key].wait(10)
        began = time.monotonic()
        engine.worker.stop(30, now=True)
        took = time.monotonic() - began
        status = engine.store.fetch_statuses(partition_for(b"o", 4), [task.key])[task.key]
        (closed,) = engine.store.attempts(partition_for(b"o", 4), task.key)
        stopped_by = engine.worker.client_id
    assert took < 10
    assert (status.state, status.attempts) == (TaskState.PENDING, 1)
    assert status.last_error == "attempt 1 interrupted (worker stopping); it runs again"
    assert (closed.number, closed.outcome, closed.worker) == (
        1,
        AttemptOutcome.INTERRUPTED,
        stopped_by,
    )
    assert closed.started_ms is not None and closed.ended_ms is not None


def test_stop_now_cuts_short_a_graceful_stop_already_waiting(data_dir):
    recorder = Recorder()
    recorder.block = lambda task: True
    with embedded_engine(recorder, data_dir=data_dir, settings=LONG_DEADLINE) as engine:
        task = Task("o", soon(), "long")
        engine.client.schedule_task(task).result(timeout=10)
        assert recorder.started[task.key].wait(10)
        graceful = threading.Thread(target=engine.worker.stop)
        graceful.start()
        graceful.join(0.5)
        assert graceful.is_alive()  # waiting for the attempt, up to 120 s
        engine.worker.stop(30, now=True)
        graceful.join(10)
        assert not graceful.is_alive()


def test_a_graceful_stop_lets_an_attempt_finish_within_the_deadline(data_dir):
    recorder = Recorder()
    recorder.block = lambda task: True
    with embedded_engine(recorder, data_dir=data_dir, settings=LONG_DEADLINE) as engine:
        task = Task("o", soon(), "finishes")
        engine.client.schedule_task(task).result(timeout=10)
        assert recorder.started[task.key].wait(10)
        threading.Timer(0.3, recorder.release.set).start()
        engine.worker.stop(30)
        status = engine.store.fetch_statuses(partition_for(b"o", 4), [task.key])[task.key]
    assert status.state is TaskState.SUCCEEDED


def test_an_attempt_that_ignores_the_cancel_is_still_left_pending(data_dir, monkeypatch):
    monkeypatch.setattr(partition_supervisor, "CANCEL_GRACE_S", 0.2)
    release = threading.Event()
    started = threading.Event()

    def stubborn(task, context):
        started.set()
        release.wait(30)  # never looks at context.cancelled

    try:
        with embedded_engine(stubborn, data_dir=data_dir, settings=LONG_DEADLINE) as engine:
            task = Task("o", soon(), "stubborn")
            engine.client.schedule_task(task).result(timeout=10)
            assert started.wait(10)
            engine.worker.stop(30, now=True)
            status = engine.store.fetch_statuses(partition_for(b"o", 4), [task.key])[task.key]
            (closed,) = engine.store.attempts(partition_for(b"o", 4), task.key)
    finally:
        release.set()
    assert (status.state, status.attempts) == (TaskState.PENDING, 1)
    # Closed although it still runs: its start from the RUNNING record, its end at the stop.
    assert closed.outcome is AttemptOutcome.INTERRUPTED
    assert closed.started_ms is not None and closed.ended_ms is not None


def test_a_deadline_ended_early_stops_a_wait_at_once():
    deadline = StopDeadline(120.0)
    never = threading.Event()
    threading.Timer(0.1, deadline.end_now).start()
    began = time.monotonic()
    assert deadline.wait_for(never) is False
    assert time.monotonic() - began < 5
    assert deadline.ended_early and deadline.remaining() == 0.0


@pytest.mark.parametrize(("elapsed", "left"), [(0.0, 30.0), (10.0, 20.0), (45.0, 0.0)])
def test_a_deadline_counts_down_on_its_clock(elapsed, left):
    now = [100.0]
    deadline = StopDeadline(30.0, clock=lambda: now[0])
    now[0] += elapsed
    assert deadline.remaining() == left
    done = threading.Event()
    done.set()
    assert deadline.wait_for(done) is True


def test_a_cancelled_attempt_still_running_at_the_stop_stays_cancelled(data_dir, monkeypatch):
    monkeypatch.setattr(partition_supervisor, "CANCEL_GRACE_S", 0.2)
    release = threading.Event()
    started = threading.Event()
    told = threading.Event()

    def stubborn(task, context):
        started.set()
        if context.cancelled.wait(30):
            told.set()
        release.wait(30)  # goes on regardless

    try:
        with embedded_engine(stubborn, data_dir=data_dir, settings=LONG_DEADLINE) as engine:
            task = Task("o", soon(), "stubborn")
            engine.client.schedule_task(task).result(timeout=10)
            assert started.wait(10)
            engine.client.cancel_task(task.key).result(timeout=10)
            assert told.wait(10)
            engine.worker.stop(30, now=True)
            status = engine.store.fetch_statuses(partition_for(b"o", 4), [task.key])[task.key]
            (closed,) = engine.store.attempts(partition_for(b"o", 4), task.key)
    finally:
        release.set()
    assert status.state is TaskState.CANCELLED
    assert closed.outcome is AttemptOutcome.CANCELLED and closed.ended_ms is not None


def test_the_embedded_scheduler_stops_now_too(data_dir):
    recorder = Recorder()
    recorder.block = lambda task: True
    with embedded_engine(recorder, data_dir=data_dir, settings=LONG_DEADLINE) as engine:
        task = Task("o", soon(), "long")
        engine.client.schedule_task(task).result(timeout=10)
        assert recorder.started[task.key].wait(10)
        began = time.monotonic()
        engine.stop(now=True)
        assert time.monotonic() - began < 10
