"""`scheduler tasks cancel KEY` stops a running task's process, on both backends."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.helpers import wait_for


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def cancel_a_running_sleep(
    script: Callable[..., subprocess.CompletedProcess[str]], pid_file: Path, timeout: float
) -> None:
    """Enqueue a command that sleeps for five minutes, cancel it by the key `enqueue` printed
    once it runs, and see its process gone and its status CANCELLED for good."""
    data = {"argv": ["/bin/sh", "-c", f"echo $$ > {pid_file}; exec sleep 300"]}
    enqueued = script("enqueue", "nightly/eu", "--key", "load/1", "--data", json.dumps(data))
    assert enqueued.returncode == 0, enqueued.stderr
    key = enqueued.stdout.split()[1]
    assert key.startswith("nightly/eu/") and key.endswith("Z/load/1"), enqueued.stdout

    def state() -> str:
        shown = script("tasks", "show", key, "--json")
        return json.loads(shown.stdout)["state"] if shown.returncode == 0 else shown.stderr

    assert wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout)
    pid = int(pid_file.read_text())
    assert wait_for(lambda: state() == "running", timeout), state()

    cancelled = script("tasks", "cancel", key)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"cancel requested for {key}" in cancelled.stdout
    assert wait_for(lambda: not alive(pid), 10), "the command still runs"
    assert wait_for(lambda: state() == "cancelled", timeout), state()
    time.sleep(1.0)  # a status flush or two later, it is still CANCELLED
    assert state() == "cancelled"


def test_cancel_stops_a_running_command_on_the_embedded_backend(
    script, worker, embedded, monkeypatch, tmp_path
):
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "command")
    running = worker()
    cancel_a_running_sleep(script, tmp_path / "pid", timeout=60)
    assert running.poll() is None


@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.slow
def test_cancel_stops_a_running_command_on_kafka_and_cassandra(
    script, worker, distributed, monkeypatch, tmp_path
):
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "command")
    applied = script("schema", "apply")
    assert applied.returncode == 0, applied.stderr
    running = worker()
    cancel_a_running_sleep(script, tmp_path / "pid", timeout=120)
    assert running.poll() is None
