"""The embedded files on a full disk: the error says so and what to do, and the process goes on
once there is room again. SQLite's `max_page_count` makes a database full without filling a
disk: SQLite answers exactly as for a full disk (SQLITE_FULL, and it rolls back by itself)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduler.errors import BackendUnavailableError
from scheduler.logs import _embedded_writer
from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.model import Task
from scheduler.stores.sqlite import SqliteTaskStore

ROOMY = 1 << 30


def full(connection, pages: int | None = None) -> None:
    """Let the database at `connection` grow by no page more (or to `pages`)."""
    if pages is None:
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
    connection.execute(f"PRAGMA max_page_count={pages}")


def says_the_disk_is_full(error: BaseException) -> None:
    message = str(error)
    assert "database or disk is full" in message, message
    assert "no space left" in message and "SCHEDULER_DATA_DIR" in message, message
    # SQLite rolls back by itself on a full disk; the ROLLBACK after it used to fail, and its
    # error was the one raised.
    assert "cannot rollback" not in message and "no such savepoint" not in message, message


def test_a_send_to_a_full_log_says_so_and_sending_resumes_once_there_is_room(
    tmp_path: Path,
) -> None:
    log = EmbeddedTaskLog(path=str(tmp_path / "log.db"), topic="t")
    log.ensure_topic(2)
    producer = log.producer()
    producer.send(b"k", b"before").result(timeout=10)
    with log.db_lock:
        full(log.db)
    with pytest.raises(BackendUnavailableError) as raised:
        producer.send(b"k", b"x" * 100_000).result(timeout=10)
    says_the_disk_is_full(raised.value)
    with log.db_lock:
        full(log.db, ROOMY)
    producer.send(b"k", b"after").result(timeout=10)
    assert sum(lag.end for lag in log.describe_group("g")) == 2
    log.close()


def test_a_retention_round_that_fails_is_logged_and_sending_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The round ran on the writer thread and an error ended the thread: every later send of
    the process waited for an acknowledgement that never came."""
    monkeypatch.setattr(_embedded_writer, "RETENTION_INTERVAL_S", 0.0)
    log = EmbeddedTaskLog(path=str(tmp_path / "log.db"), topic="t")
    log.ensure_topic(2)
    rounds = []

    def failing_round() -> None:
        rounds.append(1)
        raise BackendUnavailableError("embedded log: database is locked")

    monkeypatch.setattr(log, "apply_retention", failing_round)
    producer = log.producer()
    for value in (b"one", b"two", b"three"):
        producer.send(b"k", value).result(timeout=10)
    assert rounds, "no retention round ran"
    assert any(
        r.levelno == logging.WARNING and "could not delete records" in r.getMessage()
        for r in caplog.records
    )
    log.close()


def test_a_store_write_on_a_full_disk_says_so_and_writes_resume_once_there_is_room(
    tmp_path: Path,
) -> None:
    store = SqliteTaskStore(path=str(tmp_path / "store.db"))
    store.open()

    def tasks(prefix: str) -> list[Task]:
        now = datetime.now(UTC)
        return [Task(f"{prefix}{i}", now, "k", {"pad": "x" * 2000}) for i in range(50)]

    store.write_tasks(0, tasks("a"))
    assert store._writer is not None
    full(store._writer)
    with pytest.raises(BackendUnavailableError) as raised:
        store.write_tasks(0, tasks("b"))
    says_the_disk_is_full(raised.value)
    full(store._writer, ROOMY)
    store.write_tasks(0, tasks("c"))
    assert len(store.load_tasks(0, None, 2**62, 1000)) == 100
    store.close()
