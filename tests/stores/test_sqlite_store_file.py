"""The SQLite store's file, deleted or replaced under an open store (`check_replaced`), and a
workflow store closed while another thread uses it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduler.errors import StoreReplacedError
from scheduler.model import Task
from scheduler.stores.runs_sqlite import SqliteRunStore
from scheduler.stores.sqlite import SqliteTaskStore


def write_one(store: SqliteTaskStore) -> None:
    store.write_tasks(0, [Task("o", datetime.now(UTC), "k", {"job": "x:y"})])


def test_a_deleted_file_and_one_made_again_are_each_named(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqliteTaskStore(path=str(path))
    store.open()
    write_one(store)
    store.check_replaced()  # the file it opened: nothing to say
    for file in tmp_path.glob("store.db*"):
        file.unlink()
    with pytest.raises(StoreReplacedError, match=f"{path} was deleted while this process ran"):
        store.check_replaced()
    write_one(store)  # the deleted file still takes writes: why the check is needed at all
    other = SqliteTaskStore(path=str(path))
    other.open()  # another process makes the file again
    with pytest.raises(StoreReplacedError, match="was deleted and made again"):
        store.check_replaced()
    other.check_replaced()
    store.close()
    store.open()  # opened again, it takes the file at the path
    store.check_replaced()
    assert store.load_tasks(0, None, 2**62, 10) == []  # the new file's tasks, not the old one's
    store.close()
    other.close()


def test_a_relative_path_is_checked_where_it_was_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SqliteTaskStore(path="store.db")
    store.open()
    monkeypatch.chdir(tmp_path.parent)  # no store.db here: still the same file
    store.check_replaced()
    store.close()


def test_an_in_memory_store_has_no_file_to_check() -> None:
    store = SqliteTaskStore(path=":memory:")
    store.open()
    store.check_replaced()
    store.close()


def test_a_store_file_made_before_attempt_records_is_upgraded_when_opened(tmp_path: Path) -> None:
    import sqlite3

    from scheduler.model import Attempt, TaskState, TaskStatus

    path = tmp_path / "store.db"
    store = SqliteTaskStore(path=str(path))
    store.open()
    write_one(store)
    (row,) = store.load_tasks(0, None, 2**62, 10)
    store.record_statuses(0, [TaskStatus(row.task.key, TaskState.RETRYING, 1, "boom", 5)])
    store.close()
    with sqlite3.connect(path) as old:  # the file as the release before attempts left it
        old.execute("DROP TABLE attempts")

    store.open()
    try:
        (again,) = store.load_tasks(0, None, 2**62, 10)
        assert again.task == row.task and again.status is not None
        assert again.status.last_error == "boom"
        store.record_statuses(
            0, [TaskStatus(row.task.key, TaskState.RUNNING, 2, attempt_log=(Attempt(2, 9),))]
        )
        assert store.attempts(0, row.task.key) == [Attempt(2, 9)]
    finally:
        store.close()


def test_a_workflow_store_closed_while_another_thread_writes_waits_for_it_then_refuses(
    tmp_path: Path,
) -> None:
    """Closing the run store under a task's transaction crashed the process (SIGSEGV in sqlite3,
    seen when an embedded deployment closed its programs before its engine stopped)."""
    runs = SqliteRunStore(path=str(tmp_path / "store.db"))
    runs.open()
    inside, release = threading.Event(), threading.Event()
    outcome: list[str] = []

    def write() -> None:
        with runs._transaction() as db:
            inside.set()
            release.wait(10)
            db.execute("SELECT count(*) FROM runs").fetchall()
        outcome.append("committed")

    writer = threading.Thread(target=write)
    writer.start()
    assert inside.wait(10)
    closer = threading.Thread(target=runs.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # waits for the transaction instead of closing under it
    release.set()
    writer.join(10)
    closer.join(10)
    assert outcome == ["committed"] and not closer.is_alive()
    with pytest.raises(RuntimeError, match="run store is not open"):
        runs.get("any")
