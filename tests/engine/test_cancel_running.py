"""An operator cancels a running task: its process is stopped and its status stays CANCELLED."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from scheduler import Task, TaskState
from scheduler.executors.command import CommandExecutor
from scheduler.partitioning import partition_for
from scheduler.testing import TEST_SETTINGS, embedded_engine
from tests.engine.helpers import soon

#: Long enough that the attempt's RUNNING still waits in the tracker's buffer when the cancel
#: arrives: the flush that follows must not overwrite the CANCELLED.
SLOW_FLUSH = dataclasses.replace(TEST_SETTINGS, status_flush_ms=1500)


def sleeper(pid_file: Path) -> dict[str, list[str]]:
    """A command that writes its pid, then sleeps for five minutes as that same process."""
    return {"argv": ["/bin/sh", "-c", f"echo $$ > {pid_file}; exec sleep 300"]}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_pid(pid_file: Path, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = pid_file.read_text().strip() if pid_file.exists() else ""
        if text:
            return int(text)
        time.sleep(0.05)
    raise AssertionError(f"the command never started (no pid in {pid_file})")


def test_cancelling_a_running_command_kills_its_process_and_the_next_task_runs(data_dir, tmp_path):
    pid_file = tmp_path / "pid"
    executor = CommandExecutor(log_dir=str(tmp_path / "logs"))
    with embedded_engine(executor, data_dir=data_dir, settings=SLOW_FLUSH) as engine:
        running = Task("o", soon(), "sleeper", sleeper(pid_file))
        after = Task("o", soon(50), "after", {"argv": ["/bin/true"]})
        for task in (running, after):
            engine.client.schedule_task(task).result(timeout=10)
        pid = wait_for_pid(pid_file)
        started = time.monotonic()
        engine.client.cancel_task(running.key).result(timeout=10)
        engine.join(timeout=30)
        stopped_in = time.monotonic() - started
        partition = partition_for(b"o", 4)
        statuses = engine.store.fetch_statuses(partition, [running.key, after.key])
    assert not alive(pid)
    assert stopped_in < 5.0  # SIGTERM stopped it; not the SIGKILL 5 s later, not its 300 s
    assert statuses[running.key].state is TaskState.CANCELLED
    assert statuses[running.key].attempts == 1
    assert statuses[after.key].state is TaskState.SUCCEEDED


def test_a_cancelled_task_is_not_rerun_by_the_next_start(data_dir, tmp_path):
    pid_file = tmp_path / "pid"
    executor = CommandExecutor(log_dir=str(tmp_path / "logs"))
    task = Task("o", soon(), "sleeper", sleeper(pid_file))
    with embedded_engine(executor, data_dir=data_dir, settings=SLOW_FLUSH) as engine:
        engine.client.schedule_task(task).result(timeout=10)
        wait_for_pid(pid_file)
        engine.client.cancel_task(task.key).result(timeout=10)
        engine.join(timeout=30)
    pid_file.unlink()
    with embedded_engine(executor, data_dir=data_dir) as engine:
        engine.join(timeout=30)
        status = engine.store.fetch_statuses(partition_for(b"o", 4), [task.key])[task.key]
    assert status.state is TaskState.CANCELLED
    assert not pid_file.exists()
