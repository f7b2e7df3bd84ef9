"""`scheduler worker` as a real process: where it runs, metrics, graceful stop, bad executors."""

from __future__ import annotations

import signal
import socket
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_worker_says_where_it_runs_serves_metrics_and_stops_on_sigterm(
    worker, embedded, monkeypatch
):
    port = free_port()
    monkeypatch.setenv("SCHEDULER_METRICS_PORT", str(port))
    process = worker()
    deadline = time.monotonic() + 30
    body = b""
    while time.monotonic() < deadline and process.poll() is None:
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read()
            break
        except OSError:
            time.sleep(0.2)
    assert b"scheduler_partitions_owned" in body
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert str(embedded / "log.db") in out and "executor noop" in out
    assert f"metrics at http://0.0.0.0:{port}/metrics" in out
    assert "stopped" in out


def test_an_executor_that_cannot_be_imported_is_named(script, embedded, monkeypatch):
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "no_such_package.jobs:run")
    result = script("worker")
    assert result.returncode == 2
    assert "SCHEDULER_EXECUTOR='no_such_package.jobs:run'" in result.stderr
    assert "cannot import module" in result.stderr
    assert "Traceback" not in result.stderr
