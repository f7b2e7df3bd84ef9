"""Exit statuses through the installed console script: distinct for usage, not found, conflict,
an unavailable backend and Ctrl-C, from one table (`scheduler.cli.exit_codes`), shown in
`scheduler --help`."""

from __future__ import annotations

import pytest

from scheduler.cli import exit_codes
from scheduler.errors import (
    BackendUnavailableError,
    ConfigurationError,
    TaskNotFoundError,
    TaskStateError,
    TopicMissingError,
)
from tests.cli import test_tasks

tasks_in_store = test_tasks.tasks_in_store
"""One pending and one FAILED task in an embedded store (the fixture of test_tasks.py)."""
key_args = test_tasks.key_args


def test_a_usage_error_exits_2_and_a_mistyped_command_is_told_the_right_one(script, embedded):
    missing = script("enqueue")
    assert missing.returncode == 2 and "Missing argument 'ORDERING_ID'" in missing.stderr
    typo = script("task", "list")
    assert typo.returncode == 2 and "Did you mean 'tasks'?" in typo.stderr
    sub_typo = script("tasks", "lst")
    assert (
        sub_typo.returncode == 2
        and "No such command 'lst'. Did you mean 'list'?" in sub_typo.stderr
    )
    unlike = script("tasks", "zzz")
    assert unlike.returncode == 2 and "Did you mean" not in unlike.stderr


def test_a_bad_setting_exits_2(script, embedded, monkeypatch):
    monkeypatch.setenv("SCHEDULER_PARTITIONS", "zero")
    result = script("enqueue", "o")
    assert result.returncode == 2 and "SCHEDULER_PARTITIONS" in result.stderr


def test_a_task_that_does_not_exist_exits_4(script, tasks_in_store):
    ordering_id, time, _ = key_args(tasks_in_store["pending"])
    result = script("tasks", "show", ordering_id, time, "nope")
    assert result.returncode == exit_codes.NOT_FOUND == 4, result.stderr
    assert "no task orders-1" in result.stderr and "Traceback" not in result.stderr


def test_a_request_the_task_state_refuses_exits_5(script, tasks_in_store):
    result = script("tasks", "retry", *key_args(tasks_in_store["pending"]))
    assert result.returncode == exit_codes.CONFLICT == 5, result.stderr
    assert "it is pending" in result.stderr and "nothing was changed" in result.stderr


def test_an_unreachable_backend_exits_3(script, tasks_in_store, monkeypatch):
    monkeypatch.setenv("SCHEDULER_STORE", "cassandra")
    monkeypatch.setenv("SCHEDULER_CASSANDRA_HOSTS", "127.0.0.1:1")  # refused at once
    result = script("tasks", "list")
    assert result.returncode == exit_codes.BACKEND_UNAVAILABLE == 3, result.stderr
    assert "cannot reach Cassandra at 127.0.0.1:1" in result.stderr


def test_ctrl_c_while_a_command_starts_is_one_line_and_exits_130(run, embedded, monkeypatch):
    import scheduler.runtime

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(scheduler.runtime, "open_store", interrupted)
    from click.testing import CliRunner

    from scheduler.cli.main import cli

    result = CliRunner().invoke(cli, ["worker"])
    assert result.exit_code == 130
    assert result.output.strip() == "error: interrupted (Ctrl-C) before the command finished"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (TaskNotFoundError("x"), 4),
        (TopicMissingError("x"), 2),  # a setting that names the wrong topic
        (TaskStateError("x"), 5),
        (BackendUnavailableError("x"), 3),
        (ConfigurationError("x"), 2),
    ],
)
def test_each_error_of_the_tree_has_its_status(error, code):
    assert exit_codes.exit_code(error) == code


def test_help_lists_every_status_of_the_table(script):
    shown = script("--help").stdout
    assert "Exit status:" in shown
    for row in exit_codes.CODES:
        assert f"  {row.code}  " in shown
    assert "130  interrupted by Ctrl-C" in shown


def test_ctrl_c_while_a_worker_waits_for_kafka_at_start_up_is_one_line(embedded, monkeypatch):
    """Through the console script: a "broker" that accepts connections and never answers keeps
    the worker in its start-up; the probe port says it is there; then SIGINT."""
    import signal
    import socket
    import subprocess

    from tests.cli.conftest import SCRIPT
    from tests.cli.helpers import wait_for
    from tests.http import free_port, probe

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        monkeypatch.setenv("SCHEDULER_LOG", "kafka")
        monkeypatch.setenv("SCHEDULER_KAFKA_BOOTSTRAP", f"127.0.0.1:{silent.getsockname()[1]}")
        port = free_port()
        process = subprocess.Popen(
            [SCRIPT, "worker", "--metrics-port", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            starting = wait_for(lambda: probe(port, "/readyz"), timeout=30)
            assert starting is not None and starting[1]["state"] == "starting"
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 130, err
    assert "error: interrupted (Ctrl-C) before the command finished" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
