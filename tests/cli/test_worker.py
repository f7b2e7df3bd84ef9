"""`scheduler worker` as a real process: where it runs, metrics, graceful stop, bad executors."""

from __future__ import annotations

import json
import shutil
import signal
import time
import urllib.request

import pytest
from click.testing import CliRunner

from scheduler.cli.main import cli
from tests.cli.helpers import wait_for
from tests.http import free_port, probe


def test_the_worker_says_where_it_runs_serves_metrics_and_stops_on_sigterm(
    worker, embedded, monkeypatch
):
    port = free_port()
    monkeypatch.setenv("SCHEDULER_METRICS_PORT", str(port))
    process = worker()
    ready: dict = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None and not ready:
        try:  # 503 (an HTTPError, an OSError) until the worker has its partitions
            ready = json.loads(
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5).read()
            )
        except OSError:
            time.sleep(0.2)
    assert ready["state"] == "running" and ready["partitions"] == [0, 1, 2, 3], ready
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    assert b"scheduler_partitions_owned" in body
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert str(embedded / "log.db") in out and "executor noop" in out
    assert f"metrics at http://0.0.0.0:{port}/metrics, health at " in out
    assert "stopped" in out


@pytest.mark.parametrize("given_by", ["environment", "option", "settings file"])
def test_an_executor_that_cannot_be_imported_is_named_where_it_was_set(
    script, embedded, monkeypatch, tmp_path, given_by
):
    """The error names the value where the user wrote it, so they know what to fix."""
    monkeypatch.delenv("SCHEDULER_EXECUTOR", raising=False)
    path = "no_such_package.jobs:run"
    args = ["worker"]
    if given_by == "environment":
        monkeypatch.setenv("SCHEDULER_EXECUTOR", path)
        named = "SCHEDULER_EXECUTOR"
    elif given_by == "option":
        args += ["--executor", path]
        named = "--executor"
    else:
        config = tmp_path / "scheduler.toml"
        config.write_text(f'executor = "{path}"\n')
        args = ["--config", str(config), *args]
        named = f"settings file {str(config)!r}: executor"
    result = script(*args)
    assert result.returncode == 2
    assert f"{named}='no_such_package.jobs:run': cannot import module" in result.stderr
    assert "Traceback" not in result.stderr
    if given_by != "environment":
        assert "SCHEDULER_EXECUTOR" not in result.stderr


def test_a_worker_that_fails_to_start_prints_its_error_and_no_banner(embedded, monkeypatch):
    from scheduler.errors import ConfigurationError
    from scheduler.worker import Worker

    def refused(self: Worker) -> None:
        raise ConfigurationError("librdkafka refused the Kafka consumer configuration")

    monkeypatch.setattr(Worker, "start", refused)
    result = CliRunner().invoke(cli, ["worker"])
    assert result.exit_code == 2
    assert "librdkafka refused" in result.stderr
    assert "stop with Ctrl-C" not in result.stdout
    assert "in group" not in result.stdout


@pytest.mark.parametrize("damaged", ["log.db", "store.db"])
def test_a_damaged_embedded_file_is_named_without_a_traceback(script, embedded, damaged):
    embedded.mkdir(parents=True, exist_ok=True)
    (embedded / damaged).write_bytes(b"written by something else, not SQLite " * 4)
    result = script("worker")
    assert result.returncode == 3, result.stderr
    assert f"{str(embedded / damaged)!r}: file is not a database" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_probes_answer_starting_while_the_worker_connects(
    worker, embedded, monkeypatch, tmp_path
):
    """The port answers from the first moment: liveness passes and readiness waits while the
    executor, the log and the store are set up (a SparkSession takes seconds)."""
    port = free_port()
    gate = tmp_path / "go"
    (tmp_path / "slow_jobs.py").write_text(
        "import pathlib, time\n"
        f"while not pathlib.Path({str(gate)!r}).exists():\n"
        "    time.sleep(0.05)\n"
        "def run(task, context):\n"
        "    pass\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "slow_jobs:run")
    monkeypatch.setenv("SCHEDULER_METRICS_PORT", str(port))
    process = worker()
    deadline = time.monotonic() + 30
    while (starting := probe(port, "/readyz")) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert starting is not None and starting[0] == 503, starting
    assert starting[1]["state"] == "starting"
    live = probe(port, "/healthz")
    assert live is not None and live[0] == 200
    gate.touch()
    while (ready := probe(port, "/readyz")) is not None and ready[0] != 200:
        assert time.monotonic() < deadline + 30 and process.poll() is None
        time.sleep(0.1)
    assert ready is not None and ready[1]["partitions"] == [0, 1, 2, 3]


def states(script, ordering_id: str) -> list[str]:
    """The states of the tasks of `ordering_id`, as `scheduler tasks list` shows them."""
    listed = script("tasks", "list", "--ordering-id", ordering_id, "--json")
    return [row["state"] for row in json.loads(listed.stdout or "[]")]


def stopped_with_error(running, label: str) -> str:
    """The stderr of a worker that stopped by itself with a configuration error (exit status
    2) and no traceback."""
    _, err = running.communicate(timeout=60)
    print(f"\n[{label}] exit {running.returncode}: {err.strip().splitlines()[-1]}")
    assert running.returncode == 2, err
    assert "Traceback" not in err
    return err


def test_a_data_dir_deleted_under_a_running_worker_stops_it_and_the_next_runs_the_new_tasks(
    worker, script, embedded
):
    """`rm -r .scheduler` while a worker runs: it held the deleted files open and went on with
    them, while `scheduler enqueue` made new ones that nobody read."""
    running = worker()

    assert script("enqueue", "before", "--data", '{"job": "x:y"}').returncode == 0
    assert wait_for(lambda: states(script, "before") == ["succeeded"])
    shutil.rmtree(embedded)
    sent = script("enqueue", "after", "--data", '{"job": "x:y"}')  # makes a new data dir
    assert sent.returncode == 0, sent.stderr

    err = stopped_with_error(running, "data dir deleted")
    assert f"of the embedded log {embedded / 'log.db'} was deleted" in err
    assert "Start the workers again" in err

    worker()
    assert wait_for(lambda: states(script, "after") == ["succeeded"])


def test_a_store_file_deleted_under_a_running_worker_stops_it_before_it_commits_more(
    worker, script, embedded, monkeypatch
):
    """The store's file deleted alone (the log kept): the worker went on writing to the
    deleted file and committing what it stored there, so a task sent after the deletion was in
    no file anyone reads, and never ran once the worker restarted."""
    running = worker()

    assert script("enqueue", "stored", "--in", "1h", "--data", '{"job": "x:y"}').returncode == 0
    assert wait_for(lambda: states(script, "stored") == ["pending"])

    def committed() -> bool:  # stored first, committed a moment later
        rows = json.loads(script("group", "status", "--json").stdout or "[]")
        return bool(rows) and all(row["lag"] == 0 for row in rows)

    assert wait_for(committed)
    for path in embedded.glob("store.db*"):
        path.unlink()
    sent = script("enqueue", "after", "--data", '{"job": "x:y"}')
    assert sent.returncode == 0, sent.stderr

    err = stopped_with_error(running, "store deleted")
    assert f"the task store {embedded / 'store.db'} was deleted" in err
    assert "start the worker with a new group" in err

    # The same group has read past "stored": a new store for it is refused, as said.
    again = script("worker", timeout=60)
    assert again.returncode == 2, again.stderr
    assert "is new: no worker has used it" in again.stderr
    monkeypatch.setenv("SCHEDULER_GROUP_ID", "after-the-store-was-deleted")
    worker()
    assert wait_for(lambda: states(script, "after") == ["succeeded"])
