"""The SQLite store's file, deleted or replaced under an open store (`check_replaced`), and a
workflow store and a task store closed while other threads use them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduler.errors import BackendUnavailableError, StoreReplacedError
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


def test_the_task_store_closed_while_threads_use_it_lets_each_call_finish_or_refuse_clearly(
    tmp_path: Path,
) -> None:
    """Closing the task store closed the other threads' connections under their statements: a
    read failed with sqlite3's ProgrammingError, or crashed the process (every run of this test
    did, before close waited for them)."""
    for round_ in range(30):
        close_while_four_threads_read_and_one_writes(str(tmp_path / f"store{round_}.db"))


def close_while_four_threads_read_and_one_writes(path: str) -> None:
    now = datetime.now(UTC)
    store = SqliteTaskStore(path=path)
    store.open()
    store.write_tasks(0, [Task("o", now, f"k{i}", {"job": "x:y"}) for i in range(300)])
    until_ms = int(now.timestamp() * 1000) + 1
    unexpected: list[BaseException] = []
    refused: list[BackendUnavailableError] = []

    def read() -> None:
        assert len(store.load_tasks(0, None, until_ms, 300)) == 300

    def write() -> None:
        store.write_tasks(0, [Task("o", now, "k0", {"job": "x:z"})])  # a row written again

    def loop(call: Callable[[], None], called: threading.Event) -> None:
        try:
            while True:
                call()
                called.set()
        except BackendUnavailableError as error:
            refused.append(error)
        except BaseException as error:
            unexpected.append(error)
        finally:
            called.set()

    calls = [read] * 4 + [write]
    called = [threading.Event() for _ in calls]
    threads = [threading.Thread(target=loop, args=args) for args in zip(calls, called, strict=True)]
    for thread in threads:
        thread.start()
    for event in called:
        assert event.wait(10)
    store.close()
    for thread in threads:
        thread.join(10)
    assert unexpected == []
    assert len(refused) == len(calls)
    assert all("is closed" in str(error) for error in refused)
    with pytest.raises(BackendUnavailableError, match="is closed"):
        read()
    with pytest.raises(BackendUnavailableError, match="is closed"):
        write()
