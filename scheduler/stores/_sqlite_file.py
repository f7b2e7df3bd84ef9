"""What the SQLite stores beside the task store share: one WAL connection to a file (by default
the task store's `store.db`), a lock around it, and transactions whose errors are reported as
the store being unavailable, naming the store and its file."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from scheduler._sqlite_open import open_wal, rollback, unavailable

IN_LIMIT = 500
"""Ids per `IN (...)` read (SQLite's bound-parameter limit is 999 on old builds)."""


def in_chunks(ids: Sequence[str]) -> Iterator[tuple[tuple[str, ...], str]]:
    """`ids` in chunks of at most `IN_LIMIT`, each with the `?` marks of its `IN (...)`."""
    for start in range(0, len(ids), IN_LIMIT):
        chunk = tuple(ids[start : start + IN_LIMIT])
        yield chunk, ",".join("?" * len(chunk))


class SqliteFile:
    """Opens, closes and guards one SQLite connection; subclasses name their `what` and
    `schema` (a script of `CREATE ... IF NOT EXISTS` statements)."""

    what = "store"
    """How errors name the store ("run store", "schedule store", ...)."""
    schema = ""
    """The script `open(create_schema=True)` runs."""

    def __init__(self, *, path: str) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def open(self, *, create_schema: bool = True) -> None:
        try:
            self._db = open_wal(self.path, synchronous="NORMAL")
            if create_schema:
                self._db.executescript(self.schema)
        except sqlite3.Error as error:
            raise self._unavailable(error) from error

    def close(self) -> None:
        # Under the lock: closed while another thread's statement runs, sqlite3 crashes the
        # process (SIGSEGV); after it, that thread's next call raises "not open".
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError(f"the {self.what} is not open; call open()")
        return self._db

    def _unavailable(self, error: sqlite3.Error) -> Exception:
        return unavailable(f"{self.what} {self.path!r}", error)

    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._conn().execute(sql, params).fetchall()
            except sqlite3.Error as error:
                raise self._unavailable(error) from error

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT under the lock, rolled back and reported as unavailable
        on error."""
        with self._lock:
            db = self._conn()
            try:
                db.execute("BEGIN IMMEDIATE")
                yield db
                db.execute("COMMIT")
            except sqlite3.Error as error:
                rollback(db)
                raise self._unavailable(error) from error
            except BaseException:
                rollback(db)
                raise

    def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """The statements in one transaction."""
        with self._transaction() as db:
            for sql, params in statements:
                db.execute(sql, params)
