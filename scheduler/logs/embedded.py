"""The embedded task log: Kafka in miniature, inside one process, durable in a SQLite file.

It keeps Kafka's contract so that the engine runs unchanged on either log: a fixed partition
count stored with the topic, murmur2 placement, consecutive offsets per partition, committed
offsets per (group, partition), and consumer groups whose members split the partitions with
incremental (cooperative) rebalance callbacks delivered inside `poll` on the polling thread.

Writes go through one writer thread that drains everything queued since its last transaction and
inserts it in a single transaction: group commit, which gives Kafka's batching without a linger
delay. A `send` future resolves only after that transaction committed. Fresh records are also
kept in a bounded in-memory tail per partition, so consumers that keep up never read SQLite;
a consumer behind the tail (after a restart, or a seek) reads the file from its position.

Durability: WAL with `synchronous=NORMAL` by default. A committed transaction is in the WAL file
(the OS page cache) before its futures resolve, so an acknowledged record survives a crash or
kill -9 of the process; a power loss or OS crash may lose the last transactions, because NORMAL
does not fsync each commit. `synchronous="FULL"` fsyncs every commit (one per batch, so the cost
is latency more than throughput) for machines where that matters.

Retention: every 30 s or so the writer thread deletes the records below the lowest offset every
group has committed on a partition (none while no group has committed there). Reading below the
log start jumps to it, like Kafka's `auto.offset.reset=earliest`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from collections.abc import Collection, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

from scheduler.errors import BackendUnavailableError, ConfigurationError
from scheduler.logs._embedded_group import EmbeddedConsumer, GroupCoordinator
from scheduler.logs.abc import LogConsumer, LogProducer, LogRecord, PartitionLag, TaskLog
from scheduler.partitioning import partition_for

_SCHEMA = """
CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, partitions INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS partitions (
    topic TEXT NOT NULL, partition INTEGER NOT NULL,
    start_offset INTEGER NOT NULL, end_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    key BLOB, value BLOB, timestamp_ms INTEGER NOT NULL,
    PRIMARY KEY (topic, partition, offset)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS offsets (
    topic TEXT NOT NULL, grp TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    PRIMARY KEY (topic, grp, partition)) WITHOUT ROWID;
"""

_MAX_BATCH = 20_000
"""Records per write transaction; bounds how long one transaction holds the database."""
_RETENTION_INTERVAL_S = 30.0
_PLACEMENT_CACHE = 100_000
_INSERT = "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)"


_TailRecord = tuple[int, bytes, bytes, int]


@dataclass(slots=True)
class _Partition:
    """What the log knows about one partition; guarded by `EmbeddedTaskLog.cond`."""

    start: int
    """The log start: the lowest offset still stored."""
    end: int
    """The offset the next record will get (only committed records count)."""
    tail: deque[_TailRecord] = field(default_factory=deque)
    """The newest records, consecutive and ending at `end`, as (offset, key, value, timestamp).

    Plain tuples of atoms, not LogRecords: the garbage collector stops tracking such tuples, so
    a large tail does not make every collection slower (measurably so for producers)."""


_Pending = tuple[int, bytes, bytes, int, "Future[int]"]


class EmbeddedTaskLog(TaskLog):
    """One topic in a SQLite file (`path=None`: in memory, for tests)."""

    def __init__(
        self,
        *,
        path: str | None,
        topic: str = "scheduler-tasks",
        synchronous: str = "NORMAL",
        tail_records: int = 100_000,
        max_buffered: int = 200_000,
    ) -> None:
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ConfigurationError(
                f"synchronous={synchronous!r} could lose acknowledged records; use NORMAL or FULL"
            )
        self.topic = topic
        self.path = path
        self.cond = threading.Condition()
        """Guards the partitions and the group state; `poll` waits on it for records and moves."""
        self.partitions: list[_Partition] = []
        self.groups = GroupCoordinator(self)
        self._tail_records = tail_records
        self._max_buffered = max_buffered
        self._db_lock = threading.Lock()
        self._db = sqlite3.connect(
            path or ":memory:", isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.executescript(_SCHEMA)
        self._pending: list[_Pending] = []
        self._pending_cond = threading.Condition()
        self._placement: dict[bytes, int] = {}
        """Partition per key: murmur2 in Python costs more than the rest of `send`."""
        self._queued = 0
        """Records queued since start; the writer's `_resolved` catches up with it."""
        self._resolved = 0
        self._resolved_cond = threading.Condition()
        self._writer: threading.Thread | None = None
        self._closed = False
        self._load_topic()

    # -- topic -----------------------------------------------------------------------------

    def _load_topic(self) -> None:
        rows = self._db.execute(
            "SELECT partition, start_offset, end_offset FROM partitions WHERE topic = ?"
            " ORDER BY partition",
            (self.topic,),
        ).fetchall()
        per_partition = max(256, self._tail_records // max(1, len(rows)))
        with self.cond:
            self.partitions = [
                _Partition(start, end, deque(maxlen=per_partition)) for _, start, end in rows
            ]

    def ensure_topic(self, partitions: int) -> int:
        if partitions < 1:
            raise ConfigurationError(f"a topic needs at least one partition, got {partitions}")
        with self._db_lock:
            row = self._db.execute(
                "SELECT partitions FROM topics WHERE name = ?", (self.topic,)
            ).fetchone()
            if row is not None:
                return int(row[0])
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("INSERT INTO topics VALUES (?, ?)", (self.topic, partitions))
            self._db.executemany(
                "INSERT INTO partitions VALUES (?, ?, 0, 0)",
                [(self.topic, p) for p in range(partitions)],
            )
            self._db.execute("COMMIT")
        self._load_topic()
        return partitions

    def partition_count(self) -> int:
        with self.cond:
            count = len(self.partitions)
        if not count:
            raise ConfigurationError(
                f"topic {self.topic!r} does not exist in {self.path or 'memory'}; "
                "call ensure_topic(partitions) first"
            )
        return count

    # -- producing -------------------------------------------------------------------------

    def producer(self) -> LogProducer:
        self.partition_count()
        return EmbeddedProducer(self)

    def append(self, key: bytes, value: bytes) -> Future[int]:
        """Queue a record for the writer thread; blocks while the buffer is full."""
        future: Future[int] = Future()
        partition = self._placement.get(key)
        if partition is None:
            if len(self._placement) >= _PLACEMENT_CACHE:
                self._placement.clear()
            partition = self._placement[key] = partition_for(key, len(self.partitions))
        item = (partition, key, value, time.time_ns() // 1_000_000, future)
        with self._pending_cond:
            if self._closed:
                raise BackendUnavailableError(f"embedded log {self.topic!r} is closed")
            while len(self._pending) >= self._max_buffered:
                self._pending_cond.wait()
            self._pending.append(item)
            self._queued += 1
            if len(self._pending) == 1:
                self._pending_cond.notify_all()
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_loop, name=f"embedded-log-writer-{self.topic}", daemon=True
                )
                self._writer.start()
        return future

    def _write_loop(self) -> None:
        next_retention = time.monotonic() + _RETENTION_INTERVAL_S
        while True:
            with self._pending_cond:
                while not self._pending and not self._closed:
                    self._pending_cond.wait(max(0.0, next_retention - time.monotonic()))
                    if time.monotonic() >= next_retention:
                        break
                if self._closed and not self._pending:
                    return
                batch = self._pending[:_MAX_BATCH]
                del self._pending[:_MAX_BATCH]
                self._pending_cond.notify_all()
            if batch:
                self._write_batch(batch)
            if time.monotonic() >= next_retention:
                next_retention = time.monotonic() + _RETENTION_INTERVAL_S
                self.apply_retention()

    def _write_batch(self, batch: list[_Pending]) -> None:
        with self.cond:
            ends = [partition.end for partition in self.partitions]
        rows = []
        for partition, key, value, timestamp, _ in batch:
            rows.append((self.topic, partition, ends[partition], key, value, timestamp))
            ends[partition] += 1
        touched = {row[1] for row in rows}
        try:
            with self._db_lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(_INSERT, rows)
                    self._db.executemany(
                        "UPDATE partitions SET end_offset = ? WHERE topic = ? AND partition = ?",
                        [(ends[p], self.topic, p) for p in touched],
                    )
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
        except Exception as error:  # the writer thread must survive to fail these futures
            failure = BackendUnavailableError(f"embedded log {self.path!r}: {error}")
            for *_, future in batch:
                future.set_exception(failure)
            self._count_resolved(len(batch))
            return
        with self.cond:
            partitions = self.partitions
            for row in rows:
                partitions[row[1]].tail.append(row[2:])
            for p in touched:
                self.partitions[p].end = ends[p]
            self.cond.notify_all()
        for partition, *_, future in batch:
            future.set_result(partition)
        self._count_resolved(len(batch))

    def _count_resolved(self, count: int) -> None:
        with self._resolved_cond:
            self._resolved += count
            self._resolved_cond.notify_all()

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

    # -- reading ---------------------------------------------------------------------------

    def read(self, partition: int, offset: int, limit: int) -> list[LogRecord]:
        """Records of `partition` from `offset` on (from the tail if there, else the file)."""
        with self.cond:
            state = self.partitions[partition]
            tail = state.tail
            if tail and offset >= tail[0][0]:
                skip = offset - tail[0][0]
                fresh = [tail[i] for i in range(skip, min(len(tail), skip + limit))]
            else:
                fresh = None
            offset = max(offset, state.start)
            limit = min(limit, state.end - offset)
        if fresh is not None:
            return [LogRecord(partition, *record) for record in fresh]
        if limit <= 0:
            return []
        with self._db_lock:
            rows = self._db.execute(
                "SELECT offset, key, value, timestamp_ms FROM records"
                " WHERE topic = ? AND partition = ? AND offset >= ? ORDER BY offset LIMIT ?",
                (self.topic, partition, offset, limit),
            ).fetchall()
        return [LogRecord(partition, o, k, v, ts) for o, k, v, ts in rows]

    # -- committed offsets -----------------------------------------------------------------

    def commit(self, group_id: str, offsets: Mapping[int, int]) -> None:
        """Store committed offsets durably (one transaction) before returning."""
        rows = [(self.topic, group_id, p, o) for p, o in offsets.items()]
        try:
            with self._db_lock:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("INSERT OR REPLACE INTO offsets VALUES (?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
        except sqlite3.Error as error:
            raise BackendUnavailableError(f"embedded log {self.path!r}: {error}") from error

    def committed(self, group_id: str, partitions: Collection[int]) -> dict[int, int | None]:
        with self._db_lock:
            rows = self._db.execute(
                "SELECT partition, offset FROM offsets WHERE topic = ? AND grp = ?",
                (self.topic, group_id),
            ).fetchall()
        stored = dict(rows)
        return {p: stored.get(p) for p in partitions}

    def apply_retention(self) -> None:
        """Delete records below the lowest offset every group committed, per partition."""
        with self._db_lock:
            rows = self._db.execute(
                "SELECT partition, min(offset) FROM offsets WHERE topic = ? GROUP BY partition",
                (self.topic,),
            ).fetchall()
            moved = []
            for partition, lowest in rows:
                if partition >= len(self.partitions) or lowest <= self.partitions[partition].start:
                    continue
                moved.append((partition, lowest))
            if not moved:
                return
            self._db.execute("BEGIN IMMEDIATE")
            for partition, lowest in moved:
                self._db.execute(
                    "DELETE FROM records WHERE topic = ? AND partition = ? AND offset < ?",
                    (self.topic, partition, lowest),
                )
                self._db.execute(
                    "UPDATE partitions SET start_offset = ? WHERE topic = ? AND partition = ?",
                    (lowest, self.topic, partition),
                )
            self._db.execute("COMMIT")
        with self.cond:
            for partition, lowest in moved:
                self.partitions[partition].start = lowest

    # -- consumers and admin ---------------------------------------------------------------

    def consumer(self, group_id: str, *, client_id: str) -> LogConsumer:
        self.partition_count()
        return EmbeddedConsumer(self, group_id, client_id)

    def describe_group(self, group_id: str) -> list[PartitionLag]:
        count = self.partition_count()
        committed = self.committed(group_id, range(count))
        owners = self.groups.owners(group_id)
        with self.cond:
            ends = [partition.end for partition in self.partitions]
        return [PartitionLag(p, committed[p], ends[p], owners.get(p)) for p in range(count)]

    def close(self) -> None:
        with self._pending_cond:
            if self._closed:
                return
            self._closed = True
            self._pending_cond.notify_all()
            writer = self._writer
        if writer is not None:
            writer.join()
        with self._db_lock:
            self._db.close()


class EmbeddedProducer(LogProducer):
    """A handle on the log's shared writer; `flush` waits for every record queued before it."""

    def __init__(self, log: EmbeddedTaskLog) -> None:
        self._log = log

    def send(self, key: bytes, value: bytes) -> Future[int]:
        return self._log.append(key, value)

    def flush(self, timeout: float) -> int:
        return self._log.wait_written(timeout)

    def close(self) -> None:
        self.flush(timeout=60.0)
