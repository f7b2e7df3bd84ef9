"""Several processes opening the embedded files at the same moment, as a worker and the CLI do."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from scheduler._sqlite_open import open_wal
from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.stores.sqlite import SqliteTaskStore

PROCESSES = 4
FILES = 40
"""Before the fix, 4 processes opening one new file together failed about 1 file in 5."""


def _open_each_file_together(
    directory: str, barrier: multiprocessing.synchronize.Barrier, errors: multiprocessing.Queue
) -> None:
    failed = []
    for n in range(FILES):
        barrier.wait(timeout=60)
        try:
            if n % 2:
                log = EmbeddedTaskLog(path=f"{directory}/log-{n}.db", topic="opened")
                log.close()
            else:
                store = SqliteTaskStore(path=f"{directory}/store-{n}.db")
                store.open()
                store.close()
        except Exception as error:  # every failure is reported to the test
            failed.append(f"file {n}: {error!r}")
    errors.put(failed)


def test_processes_opening_new_files_together_all_open_them(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, errors = context.Barrier(PROCESSES), context.Queue()
    processes = [
        context.Process(target=_open_each_file_together, args=(str(tmp_path), barrier, errors))
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    failed = [failure for _ in processes for failure in errors.get(timeout=120)]
    for process in processes:
        process.join(timeout=30)
    assert failed == []
    for path in tmp_path.glob("*.db"):
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_in_memory_database_is_opened_without_waiting_for_wal() -> None:
    db = open_wal(None, synchronous="NORMAL", busy_timeout_s=0.5)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "memory"


def test_a_file_held_out_of_wal_mode_fails_with_the_reason(tmp_path: Path) -> None:
    path = str(tmp_path / "held.db")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")  # nobody can change the journal mode until it ends
    with pytest.raises(sqlite3.OperationalError, match=r"WAL mode.*database is locked"):
        open_wal(path, synchronous="NORMAL", busy_timeout_s=0.3)
    holder.execute("ROLLBACK")
    assert open_wal(path, synchronous="NORMAL").execute("PRAGMA journal_mode").fetchone() == (
        "wal",
    )
