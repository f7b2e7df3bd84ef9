"""The embedded log's writer thread: group commit, safe against writers in other processes.

One thread inserts everything queued since its last transaction in one transaction: batching
without a linger delay. Offsets are assigned inside it from the `partitions` table, never from
memory, since another process may have appended meanwhile; SQLite's write lock makes that atomic
across processes. A `send` future resolves only after the transaction committed.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from scheduler._sqlbatch import many_rows
from scheduler._sqlite_open import in_words, unavailable
from scheduler.errors import BackendUnavailableError
from scheduler.logs._embedded_schema import transaction
from scheduler.logs.abc import BatchFuture, RecordKey, key_bytes

if TYPE_CHECKING:
    from scheduler.logs.embedded import EmbeddedTaskLog

MAX_BATCH = 20_000
"""Records per write transaction; bounds how long one transaction holds the database."""
RETENTION_INTERVAL_S = 30.0
logger = logging.getLogger(__name__)
_INSERT = "INSERT INTO records VALUES"
_ENDS = "SELECT partition, end_offset FROM partitions WHERE topic = ?"
_SET_END = "UPDATE partitions SET end_offset = ? WHERE topic = ? AND partition = ?"

Pending = tuple[int, RecordKey, bytes, int, "Future[int] | BatchFuture"]
"""A queued record: (partition, key, value, timestamp_ms, future); a str key is encoded here, on
the writer's thread, rather than on the sender's."""
Row = tuple[str, int, int, bytes, bytes, int]
"""A written record as inserted: (topic, partition, offset, key, value, timestamp_ms)."""


class GroupCommitWriter:
    """The queue of records to append and the thread that writes them."""

    def __init__(self, log: EmbeddedTaskLog, *, max_buffered: int) -> None:
        self._log = log
        self._max_buffered = max_buffered
        self._pending: list[Pending] = []
        self._pending_cond = threading.Condition()
        self._queued = 0
        """Records queued since start; `_resolved` catches up with it."""
        self._resolved = 0
        self._resolved_cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def append(self, item: Pending) -> None:
        """Queue a record; blocks while the buffer is full (backpressure)."""
        with self._pending_cond:
            if self._closed:
                raise BackendUnavailableError(f"embedded log {self._log.topic!r} is closed")
            while len(self._pending) >= self._max_buffered:
                self._pending_cond.wait()
            self._pending.append(item)
            self._queued += 1
            if len(self._pending) == 1:
                self._pending_cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._write_loop,
                    name=f"embedded-log-writer-{self._log.topic}",
                    daemon=True,
                )
                self._thread.start()

    def wait_written(self, timeout: float) -> int:
        """Wait until every record queued so far is resolved; return how many are not yet.

        Futures resolve in queue order (one writer, FIFO), so a count is enough to wait on.
        """
        with self._pending_cond:
            target = self._queued
        deadline = time.monotonic() + timeout
        with self._resolved_cond:
            while self._resolved < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._resolved_cond.wait(remaining)
            return max(0, target - self._resolved)

    def close(self) -> None:
        """Write what is queued, then stop the thread."""
        with self._pending_cond:
            if self._closed:
                return
            self._closed = True
            self._pending_cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _write_loop(self) -> None:
        next_retention = time.monotonic() + RETENTION_INTERVAL_S
        while True:
            with self._pending_cond:
                while not self._pending and not self._closed:
                    self._pending_cond.wait(max(0.0, next_retention - time.monotonic()))
                    if time.monotonic() >= next_retention:
                        break
                if self._closed and not self._pending:
                    return
                batch = self._pending[:MAX_BATCH]
                del self._pending[:MAX_BATCH]
                self._pending_cond.notify_all()
            if batch:
                self._write_batch(batch)
            if time.monotonic() < next_retention:
                continue
            next_retention = time.monotonic() + RETENTION_INTERVAL_S
            try:
                self._log.apply_retention()
            except Exception as error:  # raised, it would end this thread: sends would hang
                logger.warning(
                    "could not delete records every group has read from the embedded log %s "
                    "(%s); tried again in %g s, and sending goes on meanwhile",
                    self._log.path,
                    in_words(error),
                    RETENTION_INTERVAL_S,
                )

    def _write_batch(self, batch: list[Pending]) -> None:
        log = self._log
        topic = log.topic
        rows: list[Row] = []
        try:
            with log.db_lock, transaction(log.db) as db:
                ends = dict(db.execute(_ENDS, (topic,)).fetchall())
                for partition, key, value, timestamp, _ in batch:
                    offset = ends[partition]
                    rows.append((topic, partition, offset, key_bytes(key), value, timestamp))
                    ends[partition] = offset + 1
                for sql, params in many_rows(_INSERT, rows):
                    db.execute(sql, params)
                touched = {row[1] for row in rows}
                db.executemany(_SET_END, [(ends[p], topic, p) for p in touched])
        except Exception as error:  # the writer thread must survive to fail these futures
            failure = unavailable(f"embedded log {log.path!r}", error)
            for *_, future in batch:
                future.set_exception(failure)
            self._count_resolved(len(batch))
            return
        log.took_written(rows)
        for partition, *_, future in batch:
            future.set_result(partition)
        self._count_resolved(len(batch))

    def _count_resolved(self, count: int) -> None:
        with self._resolved_cond:
            self._resolved += count
            self._resolved_cond.notify_all()
