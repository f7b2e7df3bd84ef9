"""`scheduler tasks retry|drop|rerun` by filter, with `--dry-run`: what a filter selects, paged
through the store, and what the worker then does with it, on both backends."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import scheduler
from scheduler import Task, TaskFilter, TaskState
from scheduler.bulk import PAGE_SIZE, BulkOperation
from scheduler.cli.keys import describe_key, iso
from scheduler.errors import ConfigurationError, TaskStateError
from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.model import TaskStatus
from scheduler.partitioning import partition_for
from scheduler.stores.sqlite import SqliteTaskStore
from tests.cli.helpers import wait_for

PARTITIONS = 4
Script = Callable[..., subprocess.CompletedProcess[str]]


def log_ends(data_dir: Path) -> int:
    """Records on the embedded log, over all partitions."""
    log = EmbeddedTaskLog(path=str(data_dir / "log.db"), topic="scheduler-tasks")
    try:
        return sum(lag.end for lag in log.describe_group("nobody"))
    finally:
        log.close()


@pytest.fixture
def many_failed(embedded) -> list[Task]:
    """More FAILED tasks of one ordering id than a page holds, and one of another, written the
    way a worker would have."""
    embedded.mkdir(parents=True, exist_ok=True)
    log = EmbeddedTaskLog(path=str(embedded / "log.db"), topic="scheduler-tasks")
    log.ensure_topic(PARTITIONS)
    log.close()
    store = SqliteTaskStore(path=str(embedded / "store.db"))
    store.open()
    store.claim_meta("partition_count", str(PARTITIONS))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    tasks = [Task("batch", start + timedelta(seconds=n), f"t{n:05}", {"n": n}) for n in range(1200)]
    tasks.append(Task("other", start, "lone", {"n": -1}))
    for ordering_id in ("batch", "other"):
        own = [task for task in tasks if task.ordering_id == ordering_id]
        partition = partition_for(ordering_id.encode(), PARTITIONS)
        store.record_statuses(
            partition,
            [TaskStatus(t.key, TaskState.FAILED, 3, "boom", data=t.data) for t in own],
        )
    store.close()
    return tasks


def test_a_dry_run_counts_every_page_and_shows_the_first_keys_sending_nothing(
    run, many_failed, embedded
):
    before = log_ends(embedded)
    result = run("tasks", "retry", "--ordering-id", "batch", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "would retry 1,200 tasks (dry run: nothing was changed)"
    batch = partition_for(b"batch", PARTITIONS)
    assert lines[1:11] == [
        f"  {describe_key(task.key)} (partition {batch})" for task in many_failed[:10]
    ]
    assert lines[11] == "  ... and 1,190 more"
    assert log_ends(embedded) == before
    assert PAGE_SIZE * 2 < 1200  # more than two pages were read


def test_a_bulk_drop_sends_one_record_per_selected_task_within_the_time_range(
    run, many_failed, embedded
):
    before = log_ends(embedded)
    since, until = many_failed[100].scheduled_ms, many_failed[700].scheduled_ms
    result = run(
        "tasks", "drop", "--from", iso(since), "--until", str(until), "--json"
    )  # ISO and epoch milliseconds alike
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.output)
    assert (outcome["operation"], outcome["count"], outcome["dry_run"]) == ("drop", 600, False)
    assert outcome["first"][0]["key"] == describe_key(many_failed[100].key)
    assert log_ends(embedded) == before + 600


def test_filters_and_keys_are_refused_together_and_neither_is_refused_too(run, many_failed):
    key = [many_failed[0].ordering_id, iso(many_failed[0].scheduled_ms), "t00000"]
    both = run("tasks", "rerun", *key, "--state", "failed")
    assert both.exit_code == 2 and "not both" in both.output
    neither = run("tasks", "drop")
    assert neither.exit_code == 2 and "--dry-run" in neither.output
    # Only the states the operation applies to are offered.
    wrong = run("tasks", "retry", "--state", "succeeded")
    assert wrong.exit_code == 2 and "'failed'" in wrong.output
    empty = run("tasks", "retry", "--ordering-id", "nobody")
    assert empty.exit_code == 0 and "no tasks match: nothing to retry" in empty.output
    assert "(retry takes failed tasks; `scheduler tasks list` shows the tasks' states)" in (
        empty.output
    )
    backwards = run("tasks", "retry", "--from", "2026-01-02T00:00:00Z", "--until", "2026-01-01Z")
    assert backwards.exit_code == 2 and "--until" in backwards.output


def test_the_python_api_pages_through_the_store_and_refuses_a_client_without_one(
    many_failed, embedded
):
    with scheduler.connect(admin=True) as client:
        dry = client.rerun_tasks(TaskFilter(states={TaskState.FAILED}), dry_run=True)
        assert (dry.count, dry.dry_run, len(dry.sample)) == (1201, True, 10)
        with pytest.raises(TaskStateError, match="retry applies to failed tasks only"):
            client.retry_tasks(TaskFilter(states={TaskState.SUCCEEDED}))
        before = log_ends(embedded)
        done = client.retry_tasks(TaskFilter(ordering_id="other"))
        assert (done.operation, done.count) == (BulkOperation.RETRY, 1)
        assert done.sample == ((partition_for(b"other", PARTITIONS), many_failed[-1].key),)
    assert log_ends(embedded) == before + 1
    with scheduler.connect() as producer, pytest.raises(ConfigurationError, match="admin=True"):
        producer.drop_tasks(TaskFilter(ordering_id="other"))


# -- end to end: a worker applies what the commands select -----------------------------------


def listed(script: Script, ordering_id: str) -> dict[str, str]:
    result = script("tasks", "list", "--ordering-id", ordering_id, "--json", "--limit", "1000")
    assert result.returncode == 0, result.stderr
    return {row["uniqueness_key"]: row["state"] for row in json.loads(result.stdout)}


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize(
    "backends",
    [
        "embedded",
        pytest.param("distributed", marks=[pytest.mark.kafka, pytest.mark.cassandra]),
    ],
)
def test_a_worker_retries_drops_and_reruns_what_the_filters_select(
    backends: str,
    request: pytest.FixtureRequest,
    script: Script,
    worker,
    monkeypatch,
    tmp_path: Path,
):
    request.getfixturevalue(backends)
    for name, value in {
        "SCHEDULER_EXECUTOR": "command",
        "SCHEDULER_RETRY_MAX_ATTEMPTS": "1",
        "SCHEDULER_PARTITIONS": "4",
    }.items():
        monkeypatch.setenv(name, value)
    ran = tmp_path / "ran.txt"
    running = worker()

    def command(then: str) -> dict[str, object]:
        return {"argv": ["sh", "-c", f'echo "$0" >> {ran}; {then}', "{{uniqueness_key}}"]}

    due = datetime.now(UTC) + timedelta(seconds=2)
    failing = [
        Task("bulk-f", due + timedelta(milliseconds=n), f"f{n}", command("exit 1"))
        for n in range(6)
    ]
    passing = [
        Task("bulk-s", due + timedelta(milliseconds=n), f"s{n}", command("true")) for n in range(3)
    ]
    assert wait_for(lambda: script("group", "status").returncode == 0, 120)
    with scheduler.connect() as client:
        for task in failing + passing:
            client.schedule_task(task).result(timeout=30)
    assert wait_for(
        lambda: (
            listed(script, "bulk-f") == {t.uniqueness_key: "failed" for t in failing}
            and listed(script, "bulk-s") == {t.uniqueness_key: "succeeded" for t in passing}
        ),
        120,
    ), (listed(script, "bulk-f"), listed(script, "bulk-s"), running.poll())
    assert sorted(lines(ran)) == sorted(t.uniqueness_key for t in failing + passing)

    dry = script("tasks", "rerun", "--ordering-id", "bulk-s", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["count"] == 3
    dropped = script(
        "tasks", "drop", "--ordering-id", "bulk-f", "--until", iso(failing[3].scheduled_ms)
    )
    assert dropped.returncode == 0, dropped.stderr
    assert dropped.stdout.startswith("drop requested for 3 tasks")
    assert wait_for(lambda: set(listed(script, "bulk-f")) == {"f3", "f4", "f5"}, 60)

    retried = script("tasks", "retry", "--state", "failed", "--ordering-id", "bulk-f")
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout.startswith("retry requested for 3 tasks")
    rerun = script(
        "tasks", "rerun", "--ordering-id", "bulk-s", "--data", json.dumps(command("true"))
    )
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.startswith("rerun requested for 3 tasks")

    expected = sorted(t.uniqueness_key for t in failing + passing + failing[3:] + passing)
    assert wait_for(lambda: sorted(lines(ran)) == expected, 60), lines(ran)
    assert wait_for(
        lambda: (
            listed(script, "bulk-f") == {"f3": "failed", "f4": "failed", "f5": "failed"}
            and listed(script, "bulk-s") == {t.uniqueness_key: "succeeded" for t in passing}
        ),
        60,
    )
    assert running.poll() is None
    running.terminate()
    assert running.wait(timeout=60) == 0
