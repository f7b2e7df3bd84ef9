"""`scheduler tasks show` prints a task's attempt history; `tasks list` says when it cuts the
listing short and shows the useful part of each error."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler import Task
from scheduler.cli.keys import iso
from scheduler.cli.task_history import error_summary
from scheduler.executors.command import CommandExecutor
from scheduler.testing import embedded_engine

PARTITIONS = 4


def key_args(task: Task) -> list[str]:
    return [task.ordering_id, iso(task.scheduled_ms), task.uniqueness_key]


@pytest.fixture
def ran_a_command(embedded: Path, tmp_path: Path) -> dict[str, object]:
    """A command task run by a real engine on the CLI's data dir: exit 3, then exit 0."""
    logs = tmp_path / "logs"
    argv = [
        "/bin/sh",
        "-c",
        'echo "try $SCHEDULER_ATTEMPT"; test "$SCHEDULER_ATTEMPT" -ge 2 || exit 3',
    ]
    task = Task("orders-9", datetime.now(UTC), "nightly", {"argv": argv})
    executor = CommandExecutor(log_dir=str(logs))
    with embedded_engine(executor, data_dir=embedded, partitions=PARTITIONS) as engine:
        engine.client.schedule_task(task).result(timeout=10)
        engine.join(raise_failures=False)
        worker = engine.worker.client_id
    return {"task": task, "worker": worker, "logs": logs}


def test_show_prints_each_attempt_with_its_outcome_exit_code_worker_and_log(script, ran_a_command):
    task = ran_a_command["task"]
    assert isinstance(task, Task)
    result = script("tasks", "show", *key_args(task))

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "state:             succeeded" in out
    assert '"argv": ["/bin/sh"' in out  # a succeeded task's data is kept
    header, first, second = [
        line for line in out.splitlines() if line.startswith(("ATTEMPT", "1 ", "2 "))
    ]
    assert header.split() == ["ATTEMPT", "OUTCOME", "STARTED", "DURATION", "EXIT", "WORKER", "LOG"]
    assert first.split()[1:2] == ["failed"] and " 3 " in first
    assert second.split()[1:2] == ["succeeded"] and " 0 " in second
    for line in (first, second):
        assert str(ran_a_command["worker"]) in line and str(ran_a_command["logs"]) in line
        assert " s " in line  # a duration in seconds
    assert "attempt 1 error: scheduler.executors.command.CommandFailedError: task" in out
    assert "exited with code 3" in out


def test_show_json_holds_the_attempt_history(script, ran_a_command):
    task = ran_a_command["task"]
    assert isinstance(task, Task)
    result = script("tasks", "show", *key_args(task), "--json")

    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["state"] == "succeeded" and shown["data"] == dict(task.data)
    first, second = shown["attempt_history"]
    assert (first["attempt"], first["outcome"], first["exit_code"]) == (1, "failed", 3)
    assert (second["attempt"], second["outcome"], second["exit_code"]) == (2, "succeeded", 0)
    for attempt in (first, second):
        assert attempt["worker"] == ran_a_command["worker"]
        assert attempt["duration_s"] >= 0
        assert attempt["ended_ms"] - attempt["started_ms"] == round(attempt["duration_s"] * 1000)
        assert Path(attempt["log_path"]).read_text() == f"try {attempt['attempt']}\n"
    assert "exited with code 3" in first["error"] and second["error"] is None


def test_show_of_a_task_that_never_ran_says_it_has_no_attempt(run, embedded):
    from scheduler.stores.sqlite import SqliteTaskStore

    embedded.mkdir(parents=True)
    store = SqliteTaskStore(path=str(embedded / "store.db"))
    store.open()
    task = Task("orders-1", datetime.now(UTC) + timedelta(hours=1), "later")
    from scheduler.partitioning import partition_for

    store.write_tasks(partition_for(b"orders-1", PARTITIONS), [task])
    store.close()
    # The log too, so that the data dir is a deployment the CLI recognises.
    from scheduler.logs.embedded import EmbeddedTaskLog

    log = EmbeddedTaskLog(path=str(embedded / "log.db"), topic="scheduler-tasks")
    log.ensure_topic(PARTITIONS)
    log.close()

    result = run("tasks", "show", *key_args(task))
    assert result.exit_code == 0, result.output
    assert "no attempt recorded" in result.output
    assert (
        json.loads(run("tasks", "show", *key_args(task), "--json").output)["attempt_history"] == []
    )


def test_list_says_when_it_shows_fewer_tasks_than_match(script, embedded):
    with embedded_engine(lambda t, c: None, data_dir=embedded, partitions=PARTITIONS) as engine:
        later = datetime.now(UTC) + timedelta(hours=1)
        for n in range(5):
            engine.client.schedule_task(Task(f"o{n}", later, f"k{n}")).result(timeout=10)
        engine.join(include_future=False)
        engine.wait_until_idle(include_future=False)

    cut = script("tasks", "list", "--limit", "3")
    assert cut.returncode == 0, cut.stderr
    assert len(cut.stdout.splitlines()) == 1 + 3
    assert "showing the first 3 matching tasks" in cut.stderr and "--limit 30" in cut.stderr

    cut_json = script("tasks", "list", "--limit", "3", "--json")
    assert len(json.loads(cut_json.stdout)) == 3 and "showing the first 3" in cut_json.stderr

    whole = script("tasks", "list", "--limit", "5")
    assert len(whole.stdout.splitlines()) == 1 + 5 and "showing" not in whole.stderr


def test_list_shows_the_errors_message_before_its_class(script, ran_a_command, embedded):
    from scheduler.model import TaskKey, TaskState, TaskStatus
    from scheduler.partitioning import partition_for
    from scheduler.stores.sqlite import SqliteTaskStore

    key = TaskKey.from_ms("orders-2", 1_800_000_000_000, "broken")
    error = (
        "scheduler.executors.command.CommandFailedError: task orders-2/1800000000000/broken: "
        "/usr/bin/nightly-export exited with code 3; stderr in /var/log/x.err:\nline one"
    )
    store = SqliteTaskStore(path=str(embedded / "store.db"))
    store.open()
    store.record_statuses(
        partition_for(b"orders-2", PARTITIONS), [TaskStatus(key, TaskState.FAILED, 3, error)]
    )
    store.close()

    result = script("tasks", "list", "--state", "failed")
    assert result.returncode == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines() if "broken" in line]
    last_error = row.split("  ")[-1].strip()
    assert last_error.startswith("/usr/bin/nightly-export exited with code 3; stderr in /var/")


@pytest.mark.parametrize(
    ("error", "summary"),
    [
        (
            "scheduler.executors.command.CommandFailedError: task o/17/u: /bin/x exited with "
            "code 3; stderr in /l/e.err:\nlast lines",
            "/bin/x exited with code 3; stderr in /l/e.err (CommandFailedError)",
        ),
        (
            "scheduler.executors.command.CommandFailedError: task a/b/2026-11-22T10:00:00.000Z/u:"
            " /bin/x exited with code 3; stderr in /l/e.err:\nlast lines",
            "/bin/x exited with code 3; stderr in /l/e.err (CommandFailedError)",
        ),
        ("RuntimeError: boom", "boom (RuntimeError)"),
        (
            "TaskTimeoutError: attempt ran past its timeout",
            "attempt ran past its timeout (TaskTimeoutError)",
        ),
        ("cancelled: partition revoked", "cancelled: partition revoked"),
        ("KeyboardInterrupt", "KeyboardInterrupt"),
        (None, None),
    ],
)
def test_an_error_summary_puts_the_message_first(error, summary):
    assert error_summary(error) == summary
