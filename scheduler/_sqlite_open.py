"""Opening a connection to one of the embedded SQLite files (the log and the store), in WAL mode.

A worker, the CLI and producers open the same files from several processes, often at the same
moment: `scheduler worker` starts while `scheduler group status` asks whether it has joined. Two
processes turning a new file to WAL at once make one of them fail with "database is locked" at
once, whatever the busy timeout: SQLite does not call the busy handler while it changes the
journal mode. Measured on this machine, four processes opening a new file together: 39 failures
in 200 files. WAL is a property of the file, so once it is set nobody needs to set it again;
only the first opens can collide, and those are retried here.
"""

from __future__ import annotations

import os
import sqlite3
import time

from scheduler.errors import BackendUnavailableError

BUSY_TIMEOUT_S = 30.0
"""How long a statement waits for another process's lock before failing."""

_WAL_RETRY_S = 0.01
"""First pause before asking again for WAL mode; doubled up to 0.5 s."""


def open_wal(
    path: str | None,
    *,
    synchronous: str,
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    cached_statements: int = 128,
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), shareable between threads.

    The busy timeout is set before the first statement, so every statement waits for another
    process's transaction instead of failing. `cached_statements` sizes the connection's cache of
    prepared statements (128 is Python's default). Raises `sqlite3.OperationalError` if the file
    is still not in WAL mode after `busy_timeout_s`.
    """
    db = sqlite3.connect(
        path or ":memory:",
        isolation_level=None,
        check_same_thread=False,
        timeout=busy_timeout_s,
        cached_statements=cached_statements,
    )
    try:
        _ensure_wal(db, deadline=time.monotonic() + busy_timeout_s)
        db.execute(f"PRAGMA synchronous={synchronous.upper()}")
    except BaseException:
        db.close()
        raise
    return db


def _ensure_wal(db: sqlite3.Connection, *, deadline: float) -> None:
    pause = _WAL_RETRY_S
    while True:
        try:
            # Reading the mode takes only a shared lock, which does wait for the busy handler.
            # An in-memory database has no WAL: its mode stays "memory".
            if db.execute("PRAGMA journal_mode").fetchone()[0] in ("wal", "memory"):
                return
            if db.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal":
                return
            problem = "SQLite kept the file out of WAL mode"
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            problem = str(error)  # another process is turning the file to WAL right now
        if time.monotonic() + pause > deadline:
            raise sqlite3.OperationalError(f"cannot put the file in WAL mode: {problem}")
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def file_identity(path: str) -> str | None:
    """The device and inode of the file at `path` (`dev:ino`), None if there is none there. A
    process holds its files open, so one deleted and made again under it gets another inode:
    this tells the file a process opened from whatever is at its path now."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return f"{found.st_dev}:{found.st_ino}"


def rollback(db: sqlite3.Connection) -> None:
    """Roll back `db`'s transaction unless SQLite already has. After a full disk, an I/O error
    or running out of memory it rolls the whole transaction back by itself, and a ROLLBACK then
    fails with "cannot rollback - no transaction is active": raised from an `except` block,
    that error hid the one that said what was wrong."""
    if db.in_transaction:
        db.execute("ROLLBACK")


def in_words(error: BaseException) -> str:
    """`error` as a user should read it: for a full disk, with what to do about it."""
    if getattr(error, "sqlite_errorname", None) == "SQLITE_FULL":
        return (
            f"{error}: the file system it is on has no space left. Free some, or move "
            "SCHEDULER_DATA_DIR to a larger one; what was acknowledged before is kept"
        )
    return str(error)


def unavailable(what: str, error: BaseException) -> BackendUnavailableError:
    """The error to raise for a failed SQLite call on `what` ("task store 'x.db'")."""
    return BackendUnavailableError(f"{what}: {in_words(error)}")
