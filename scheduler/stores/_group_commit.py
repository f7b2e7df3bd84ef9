"""Group commit for the SQLite store: concurrent writers (every partition's TaskPersistence)
share one transaction instead of each rewriting the same index pages into the WAL behind the one
write lock. A writer that finds the lock busy queues its statements and waits; the one holding
it commits everything queued, each caller's statements in a savepoint (one caller's failure is
its own), then hands the lead to the first writer still waiting. `run` returns once the
caller's rows are committed, or raises.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

Statement = tuple[str, Sequence[Any]]
"""One `execute` call: SQL and its parameters."""


class _Writer:
    __slots__ = ("error", "finished", "statements", "wake")

    def __init__(self, statements: Sequence[Statement]) -> None:
        self.statements = statements
        self.wake = threading.Event()
        self.finished = False
        self.error: BaseException | None = None


class GroupCommit:
    """Runs statement lists from many threads, several per transaction."""

    def __init__(
        self,
        transaction: Callable[[], AbstractContextManager[sqlite3.Connection]],
        wrap_error: Callable[[sqlite3.Error], BaseException],
    ) -> None:
        self._transaction = transaction
        self._wrap_error = wrap_error
        self._lock = threading.Lock()
        self._queued: list[_Writer] = []
        self._leading = False
        self._held = threading.local()
        """Per thread: the statements of the `together` block it is in, or None."""

    @contextmanager
    def together(self) -> Iterator[None]:
        """Every `run` this thread makes in the block is one `run` at its end: one savepoint,
        one wait for a commit, not one per call. A call in the block returns before its rows
        are written; they are durable when the block ends. When the block raises, what was
        run before the error is still written (as without the block), then the error goes on."""
        if getattr(self._held, "statements", None) is not None:
            yield  # nested: the outer block writes
            return
        held: list[Statement] = []
        self._held.statements = held
        try:
            yield
        finally:
            self._held.statements = None
            if held:
                self.run(held)

    def run(self, statements: Sequence[Statement]) -> None:
        """Execute `statements` durably (in one savepoint); raise what made them fail."""
        held: list[Statement] | None = getattr(self._held, "statements", None)
        if held is not None:
            held.extend(statements)
            return
        writer = _Writer(statements)
        with self._lock:
            self._queued.append(writer)
            lead = not self._leading
            self._leading = True
        if not lead:
            writer.wake.wait()  # woken when committed, or to lead the next group
        if not writer.finished:
            self._lead()
        if writer.error is not None:
            raise writer.error

    def _lead(self) -> None:
        with self._lock:
            group, self._queued = self._queued, []
        try:
            self._commit(group)
        finally:
            for writer in group:
                writer.finished = True
                writer.wake.set()
            with self._lock:
                if self._queued:
                    self._queued[0].wake.set()  # not finished: it leads the next group
                else:
                    self._leading = False

    def _commit(self, group: list[_Writer]) -> None:
        try:
            with self._transaction() as connection:
                for writer in group:
                    connection.execute("SAVEPOINT writer")
                    try:
                        for sql, params in writer.statements:
                            connection.execute(sql, params)
                    except sqlite3.Error as error:
                        if not connection.in_transaction:
                            # SQLite rolled back the whole transaction (a full disk): the
                            # savepoint is gone, and the error is every writer's.
                            raise
                        connection.execute("ROLLBACK TO writer")
                        writer.error = self._wrap_error(error)
                    connection.execute("RELEASE writer")
        except BaseException as error:  # the commit itself failed: nobody's rows are in
            for writer in group:
                if writer.error is None:
                    writer.error = error
