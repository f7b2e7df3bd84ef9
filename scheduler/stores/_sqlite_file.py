"""What the SQLite stores beside the task store share: one WAL connection to a file (by default
the task store's `store.db`), a lock around it, and transactions whose errors are reported as
the store being unavailable, naming the store and its file."""

from __future__ import annotations

import sqlite3
import threading

from scheduler._sqlite_open import open_wal, rollback, unavailable


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
        if self._db is not None:
            self._db.close()
            self._db = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError(f"the {self.what} is not open; call open()")
        return self._db

    def _unavailable(self, error: sqlite3.Error) -> Exception:
        return unavailable(f"{self.what} {self.path!r}", error)

    def _transaction(self) -> Transaction:
        return Transaction(self._conn(), self)


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back and reported as unavailable on error."""

    def __init__(self, db: sqlite3.Connection, store: SqliteFile) -> None:
        self.db = db
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise self.store._unavailable(error) from error
        return self.db

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        if error is None:
            try:
                self.db.execute("COMMIT")
                return
            except sqlite3.Error as failed:
                rollback(self.db)
                raise self.store._unavailable(failed) from failed
        rollback(self.db)
        if isinstance(error, sqlite3.Error):
            raise self.store._unavailable(error) from error
