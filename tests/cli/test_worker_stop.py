"""Stopping `scheduler worker` with Ctrl-C: what it says, in what order, and what it leaves.

Each test runs the installed console script and sends it SIGINT as a terminal's Ctrl-C does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scheduler.executors.left_running import _members
from tests.cli.conftest import SCRIPT
from tests.cli.helpers import ended, wait_for, watcher_of


class RunningWorker:
    """A `scheduler worker` process whose stderr lines are read as they come."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [SCRIPT, "worker", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def index(self, text: str) -> int:
        """The number of the first line that says `text`."""
        return next(i for i, line in enumerate(self.lines) if text in line)

    def finish(self, timeout: float) -> str:
        """Wait for the exit; stdout (stderr is this object's reader's alone)."""
        self.process.wait(timeout=timeout)
        self._reader.join(10)
        assert self.process.stdout is not None
        return self.process.stdout.read()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def running_workers() -> Callable[..., RunningWorker]:
    started: list[RunningWorker] = []

    def start(*args: str) -> RunningWorker:
        started.append(RunningWorker(*args))
        return started[-1]

    yield start
    for worker in started:
        worker.kill()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def start_a_sleep(script, pid_file: Path, timeout: float) -> tuple[str, int]:
    """Enqueue a command that sleeps five minutes; its key and pid once it runs."""
    data = {"argv": ["/bin/sh", "-c", f"echo $$ > {pid_file}; exec sleep 300"]}
    enqueued = script("enqueue", "nightly", "--key", "load", "--data", json.dumps(data))
    assert enqueued.returncode == 0, enqueued.stderr
    key = enqueued.stdout.split()[1]
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout)
    return key, int(pid_file.read_text())


def shown(script, key: str) -> dict:
    result = script("tasks", "show", key, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def commands(embedded, monkeypatch):
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "command")
    return embedded


def test_a_stop_says_what_it_waits_for_and_a_second_ctrl_c_stops_at_once(
    script, running_workers, commands, monkeypatch, tmp_path
):
    monkeypatch.setenv("SCHEDULER_SHUTDOWN_DEADLINE_S", "120")
    worker = running_workers()
    key, pid = start_a_sleep(script, tmp_path / "pid", timeout=60)

    worker.process.send_signal(signal.SIGINT)
    assert wait_for(lambda: worker.said("received SIGINT, stopping"), 30), worker.lines
    waiting = worker.lines[worker.index("received SIGINT, stopping")]
    assert f"waiting up to 120 s for 1 running task(s) to finish: {key}" in waiting
    assert "Ctrl-C again to stop now" in waiting
    time.sleep(0.5)
    assert worker.process.poll() is None and alive(pid)  # still waiting for the task

    pressed = time.monotonic()
    worker.process.send_signal(signal.SIGINT)
    out = worker.finish(timeout=30)
    assert time.monotonic() - pressed < 15  # not the 120 s deadline
    assert worker.process.returncode == 0, worker.lines
    assert "stopped" in out
    assert not alive(pid)
    order = [
        "received SIGINT, stopping",
        "received SIGINT again: stopping now",
        f"stop forced: cancelled 1 running attempt ({key})",
        "left the group",
        "stopped",
    ]
    assert [worker.index(text) for text in order] == sorted(worker.index(t) for t in order)
    assert not worker.said("letting their running tasks finish")

    status = shown(script, key)
    assert (status["state"], status["attempts"]) == ("pending", 1)
    assert "interrupted" in status["last_error"]


def test_after_a_deadline_stop_the_task_is_pending_and_the_next_worker_runs_it(
    script, running_workers, commands, monkeypatch, tmp_path
):
    monkeypatch.setenv("SCHEDULER_SHUTDOWN_DEADLINE_S", "1")
    worker = running_workers()
    key, pid = start_a_sleep(script, tmp_path / "pid", timeout=60)
    worker.process.send_signal(signal.SIGINT)
    worker.finish(timeout=60)
    assert worker.process.returncode == 0, worker.lines
    assert not alive(pid)
    first, cancelled = worker.index("received SIGINT"), worker.index("deadline of 1 s passed")
    assert first < cancelled < worker.index("left the group"), worker.lines
    assert shown(script, key)["state"] == "pending"

    (tmp_path / "pid").unlink()
    again = running_workers()
    assert wait_for(lambda: shown(script, key)["state"] == "running", 60)
    assert shown(script, key)["attempts"] == 2
    again.process.send_signal(signal.SIGINT)
    again.finish(timeout=60)


def test_a_refused_second_worker_prints_its_error_once_and_no_banner(
    running_workers, script, embedded
):
    from tests.http import free_port

    first = running_workers("--metrics-port", str(free_port()))
    assert wait_for(lambda: first.said("assigned partitions"), 60), first.lines
    second = script("worker", "--metrics-port", str(free_port()))
    assert second.returncode == 2
    assert second.stderr.count("already consumed by another worker process") == 1, second.stderr
    assert "metrics at" not in second.stdout and "stop with Ctrl-C" not in second.stdout
    assert "started" not in second.stderr


@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.slow
def test_after_a_deadline_stop_on_kafka_and_cassandra_the_task_is_pending(
    script, running_workers, distributed, monkeypatch, tmp_path
):
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "command")
    monkeypatch.setenv("SCHEDULER_SHUTDOWN_DEADLINE_S", "1")
    assert script("schema", "apply").returncode == 0
    worker = running_workers()
    key, pid = start_a_sleep(script, tmp_path / "pid", timeout=120)
    assert wait_for(lambda: shown(script, key)["state"] == "running", 60)
    worker.process.send_signal(signal.SIGINT)
    worker.finish(timeout=90)
    assert worker.process.returncode == 0, worker.lines
    assert not alive(pid)
    status = shown(script, key)
    assert (status["state"], status["attempts"]) == ("pending", 1), status


def test_a_killed_workers_watcher_stops_its_command_with_no_worker_started_after(
    embedded, script, worker, monkeypatch
) -> None:
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "command")
    notes = embedded / "logs" / "command" / ".running"
    task = {"argv": ["/bin/sh", "-c", "sleep 300 & sleep 300"]}
    assert script("enqueue", "nightly", "--data", json.dumps(task)).returncode == 0
    first = worker()
    assert wait_for(lambda: list(notes.glob("*.json")), timeout=60), first.stderr
    seen = json.loads(next(notes.glob("*.json")).read_text())
    left, since = seen["pid"], seen["started"]
    watcher = watcher_of(first)
    first.kill()
    assert wait_for(lambda: _members(left, since) == [], timeout=15)
    assert wait_for(lambda: ended(watcher), timeout=10)
    assert list(notes.glob("*.json")) == []
    first.wait()
    assert first.stderr is not None
    assert f"that worker process {first.pid} left running when it died" in first.stderr.read()


def test_a_worker_started_after_one_was_killed_stops_the_command_it_left_running(
    embedded, script, worker, monkeypatch
) -> None:
    # A command runs in a process group of its own, which the killed worker's SIGKILL misses:
    # without the next worker's stop it would run on beside the task's next attempt.
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "command")
    monkeypatch.setenv("SCHEDULER_SHUTDOWN_DEADLINE_S", "1")  # the last worker's stop
    notes = embedded / "logs" / "command" / ".running"
    task = {"argv": ["/bin/sh", "-c", "sleep 300 & sleep 300"]}
    assert script("enqueue", "nightly", "--data", json.dumps(task)).returncode == 0

    def attempts() -> list[int]:
        shown = script("tasks", "list", "--ordering-id", "nightly", "--json").stdout
        return [t["attempts"] for t in json.loads(shown)]

    first = worker()
    assert wait_for(lambda: list(notes.glob("*.json")), timeout=60), first.stderr
    # Killed once the store has its attempt (statuses are written in batches): the next is 2.
    assert wait_for(lambda: attempts() == [1], timeout=30), attempts()
    seen = json.loads(next(notes.glob("*.json")).read_text())
    left, since = seen["pid"], seen["started"]
    # Killed with its watcher (as by the OOM killer taking both): only the next worker is left.
    watcher = watcher_of(first)
    watcher.kill()
    first.kill()
    first.wait()
    assert os.killpg(left, 0) is None  # still running: nothing stopped it yet

    worker()
    again = wait_for(lambda: [n for n in notes.glob("*.json") if f"-{left}." not in n.name], 60)
    assert again, "the task's next attempt did not start"
    assert _members(left, since) == []  # not one process of its group (zombies aside)

    # The new attempt's RUNNING reaches the store a moment after its command started.
    assert wait_for(lambda: attempts() == [2], timeout=30), attempts()
