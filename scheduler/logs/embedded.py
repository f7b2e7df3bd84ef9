"""The embedded task log: Kafka in miniature, in a SQLite file shared by a machine's processes.

It keeps the port's contract (`abc`), so the engine runs unchanged on either log. Any process
opening the file may produce: the writer thread (`_embedded_writer`) assigns offsets inside its
write transaction, from the file. Consumer groups live in the one worker process (a second one is
refused, see `_embedded_members`); its consumers see other processes' records by asking the file
when memory has nothing new (`catch_up`, cheap thanks to `PRAGMA data_version`). Fresh records
stay in a bounded in-memory tail per partition, so consumers that keep up never read SQLite.

Durability: WAL with `synchronous=NORMAL` by default: an acknowledged record is in the WAL file
and survives a crash or kill -9 of the process, but not a power loss; `synchronous="FULL"`
fsyncs every commit (one per batch). Retention: every 30 s the writer deletes the records below
the lowest offset every group committed on a partition.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from scheduler._sqlite_open import file_identity, open_wal, unavailable
from scheduler.codec import compact
from scheduler.errors import ConfigurationError, TopicMissingError
from scheduler.logs._delivery import DeliveryFuture
from scheduler.logs._embedded_group import EmbeddedConsumer, GroupCoordinator
from scheduler.logs._embedded_members import MemberTable
from scheduler.logs._embedded_schema import PARTITIONS, RECORDS, SCHEMA, transaction
from scheduler.logs._embedded_writer import GroupCommitWriter, Row
from scheduler.logs.abc import (
    BatchFuture,
    LogConsumer,
    LogProducer,
    LogRecord,
    PartitionLag,
    RecordKey,
    TaskLog,
    key_bytes,
)
from scheduler.partitioning import partition_for

_PLACEMENT_CACHE = 100_000
_FILE_CHECK_S = 0.025
"""How often a blocked `poll` looks for records of other processes (see `catch_up`)."""
_TailRecord = tuple[int, bytes | None, bytes | None, int]


@dataclass(slots=True)
class _Partition:
    """What this process knows about one partition; guarded by `EmbeddedTaskLog.cond`."""

    start: int
    """The log start: the lowest offset still stored."""
    end: int
    """The offset after the last record seen committed; the file may be ahead (`catch_up`)."""
    tail: deque[_TailRecord] = field(default_factory=deque)
    """The newest records, consecutive and ending at `end`, as (offset, key, value, timestamp);
    older ones are read from the file. Tuples of atoms, which the garbage collector stops
    tracking, so a large tail does not slow every collection down."""

    def take(self, records: Iterable[_TailRecord]) -> None:
        """Append committed records, skipping those already here; a gap empties the tail."""
        tail = self.tail
        for record in records:
            offset = record[0]
            if offset == self.end:
                tail.append(record)
                self.end = offset + 1
            elif offset > self.end:  # records in between are in the file
                tail.clear()
                tail.append(record)
                self.end = offset + 1


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
        self._absolute = None if path is None else os.path.abspath(path)
        """For `topic_id`: the same file whatever the working directory is later."""
        self.cond = threading.Condition()
        """Guards the partitions and the group state; `poll` waits on it for records and moves."""
        self.partitions: list[_Partition] = []
        self.groups = GroupCoordinator(self)
        self.file_check_s: float | None = None if path is None else _FILE_CHECK_S
        """How often a blocked `poll` calls `catch_up`; None when no other process can write."""
        self._tail_records = tail_records
        self.db_lock = threading.Lock()
        try:
            self.db = open_wal(path, synchronous=synchronous)
            """The connection that writes (the writer thread, commits, members); under `db_lock`."""
            self.db.executescript(SCHEMA)
            if path is None:  # a second connection to ":memory:" would be another database
                self.reader, self.read_lock = self.db, self.db_lock
            else:
                reader = open_wal(path, synchronous=synchronous)
                self.reader, self.read_lock = reader, threading.Lock()
        except sqlite3.Error as error:
            raise unavailable(f"cannot open the embedded log {path!r}", error) from error
        self._data_version = self.reader.execute("PRAGMA data_version").fetchone()[0]
        self.members = MemberTable(self)
        self.writer = GroupCommitWriter(self, max_buffered=max_buffered)
        self._placement: dict[RecordKey, int] = {}
        """Partition per key: murmur2 in Python costs more than the rest of `send`."""
        self._closed = False
        self._load_topic()

    # -- topic -----------------------------------------------------------------------------

    def _load_topic(self) -> None:
        with self.read_lock:
            cursor = self.reader.execute(PARTITIONS + " ORDER BY partition", (self.topic,))
            rows = cursor.fetchall()
        per_partition = max(256, self._tail_records // max(1, len(rows)))
        with self.cond:
            self.partitions = [
                _Partition(start, end, deque(maxlen=per_partition)) for _, start, end in rows
            ]

    def ensure_topic(self, partitions: int) -> int:
        if partitions < 1:
            raise ConfigurationError(f"a topic needs at least one partition, got {partitions}")
        # One transaction from the check on: another process may create it meanwhile.
        with self.db_lock, transaction(self.db) as db:
            row = db.execute(
                "SELECT partitions FROM topics WHERE name = ?", (self.topic,)
            ).fetchone()
            if row is None:
                db.execute("INSERT INTO topics VALUES (?, ?)", (self.topic, partitions))
                db.executemany(
                    "INSERT INTO partitions VALUES (?, ?, 0, 0)",
                    [(self.topic, p) for p in range(partitions)],
                )
        if not self.partitions:
            self._load_topic()
        return partitions if row is None else int(row[0])

    @property
    def location(self) -> str:
        return f"topic {self.topic!r} of the embedded log {self.path or 'in memory'}"

    def topic_id(self) -> str | None:
        """The identity of the log's file (device and inode): a file deleted, or deleted and
        made again (`rm -r .scheduler` while a worker runs), takes the topic with it."""
        if self._absolute is None:
            return None
        identity = file_identity(self._absolute)
        if identity is None:
            raise TopicMissingError(
                f"the embedded log {self.path} does not exist any more (deleted?); topic "
                f"{self.topic!r} went with it"
            )
        return identity

    def partition_count(self) -> int:
        if not self.partitions:
            self._load_topic()  # another process may have created the topic since
        with self.cond:
            count = len(self.partitions)
        if not count:
            raise TopicMissingError(
                f"topic {self.topic!r} does not exist in {self.path or 'memory'}; create it "
                "with the deployment's partition count first: `scheduler topic create` (workers "
                "and `scheduler enqueue` do too, with SCHEDULER_PARTITIONS), or "
                "`ensure_topic(partitions)`"
            )
        return count

    # -- producing -------------------------------------------------------------------------

    def producer(self) -> LogProducer:
        self.partition_count()
        return EmbeddedProducer(self)

    def append(self, key: RecordKey, value: bytes, future: Future[int] | BatchFuture) -> None:
        """Queue a record for the writer thread, which resolves `future` (the record's, or its
        batch's); blocks while the buffer is full."""
        partition = self._placement.get(key)
        if partition is None:
            if len(self._placement) >= _PLACEMENT_CACHE:
                self._placement.clear()
            partition = self._placement[key] = partition_for(key_bytes(key), len(self.partitions))
        # The queue and the tail keep values for a while: at their own size.
        self.writer.append((partition, key, compact(value), time.time_ns() // 1_000_000, future))

    def took_written(self, rows: list[Row]) -> None:
        """The writer committed these rows: add them to the tails and wake the polls."""
        with self.cond:
            partitions = self.partitions
            for row in rows:
                state = partitions[row[1]]
                if row[2] == state.end:  # the usual case, inlined: it runs for every record
                    state.tail.append(row[2:])
                    state.end += 1
                else:
                    state.take([row[2:]])
            self.cond.notify_all()

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
        with self.read_lock:
            cursor = self.reader.execute(RECORDS, (self.topic, partition, offset, limit))
            rows = cursor.fetchall()
        return [LogRecord(partition, o, k, v, ts) for o, k, v, ts in rows]

    def catch_up(self) -> bool:
        """Take in what other processes committed since the last look; True if a tail grew.

        SQLite cannot notify another process of a commit, so a consumer with nothing new in
        memory calls this (a blocked `poll` every `file_check_s`). `PRAGMA data_version`
        changes only when another connection committed: the usual answer is one statement."""
        if self.path is None:
            return False
        with self.read_lock:
            version = self.reader.execute("PRAGMA data_version").fetchone()[0]
            if version == self._data_version:
                return False
            self._data_version = version
            stored = self.reader.execute(PARTITIONS, (self.topic,)).fetchall()
            with self.cond:
                if len(stored) != len(self.partitions):
                    return False  # the topic was created since; `_load_topic` reads it whole
                behind = []
                for p, start, end in stored:
                    state = self.partitions[p]
                    state.start = max(state.start, start)
                    if end > state.end:
                        behind.append((p, state.end, end, state.tail.maxlen or 0))
            gaps = {
                p: self.reader.execute(RECORDS, (self.topic, p, mine, end - mine)).fetchall()
                for p, mine, end, room in behind
                if end - mine <= room
            }
        if not behind:
            return False
        with self.cond:
            for p, _, end, _ in behind:
                state = self.partitions[p]
                state.take(gaps.get(p, ()))
                if state.end < end:  # too many to keep (or deleted meanwhile): read the file
                    state.tail.clear()
                    state.end = end
            self.cond.notify_all()
        return True

    # -- committed offsets -----------------------------------------------------------------

    def commit(
        self, group_id: str, offsets: Mapping[int, int], metadata: Mapping[int, str] | None = None
    ) -> None:
        """Store committed offsets and their metadata durably (one transaction) before
        returning; an offset committed without metadata clears the partition's."""
        rows = [(self.topic, group_id, p, o) for p, o in offsets.items()]
        notes = [(self.topic, group_id, p, (metadata or {}).get(p, "")) for p in offsets]
        try:
            with self.db_lock, transaction(self.db) as db:
                db.executemany("INSERT OR REPLACE INTO offsets VALUES (?, ?, ?, ?)", rows)
                db.executemany("INSERT OR REPLACE INTO offset_metadata VALUES (?, ?, ?, ?)", notes)
        except sqlite3.Error as error:
            raise unavailable(f"embedded log {self.path!r}", error) from error

    def committed_with_metadata(
        self, group_id: str, partitions: Collection[int]
    ) -> dict[int, tuple[int | None, str]]:
        with self.read_lock:
            rows = self.reader.execute(
                "SELECT o.partition, o.offset, coalesce(m.metadata, '') FROM offsets o"
                " LEFT JOIN offset_metadata m"
                " ON m.topic = o.topic AND m.grp = o.grp AND m.partition = o.partition"
                " WHERE o.topic = ? AND o.grp = ?",
                (self.topic, group_id),
            ).fetchall()
        stored = {p: (o, m) for p, o, m in rows}
        return {p: stored.get(p, (None, "")) for p in partitions}

    def apply_retention(self) -> None:
        """Delete records below the lowest offset every group committed, per partition."""
        with self.db_lock:
            rows = self.db.execute(
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
            with transaction(self.db) as db:
                for partition, lowest in moved:
                    db.execute(
                        "DELETE FROM records WHERE topic = ? AND partition = ? AND offset < ?",
                        (self.topic, partition, lowest),
                    )
                    db.execute(
                        "UPDATE partitions SET start_offset = max(start_offset, ?)"
                        " WHERE topic = ? AND partition = ?",
                        (lowest, self.topic, partition),
                    )
        with self.cond:
            for partition, lowest in moved:
                state = self.partitions[partition]
                state.start = max(state.start, lowest)

    # -- consumers and admin ---------------------------------------------------------------

    def consumer(self, group_id: str, *, client_id: str) -> LogConsumer:
        self.partition_count()
        return EmbeddedConsumer(self, group_id, client_id)

    def first_offsets(self, partitions: Collection[int]) -> dict[int, int]:
        self.partition_count()
        with self.cond:
            return {p: self.partitions[p].start for p in partitions}

    def describe_group(
        self, group_id: str, partitions: Collection[int] | None = None
    ) -> list[PartitionLag]:
        """From the file, so that any process sees the worker's commits and everyone's records."""
        count = self.partition_count()
        numbers = range(count) if partitions is None else sorted(partitions)
        committed = self.committed_with_metadata(group_id, numbers)
        with self.read_lock:
            stored = self.reader.execute(PARTITIONS, (self.topic,)).fetchall()
        ends = {p: end for p, _, end in stored}
        owners = self.members.foreign_owners(group_id)
        owners.update(self.groups.owners(group_id))  # this process's members, exactly
        with self.cond:
            for p, state in enumerate(self.partitions):
                ends[p] = max(ends.get(p, 0), state.end)
        return [
            PartitionLag(p, committed[p][0], ends[p], owners.get(p), committed[p][1])
            for p in numbers
        ]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.writer.close()
        self.groups.forget_all()
        with self.db_lock:
            self.db.close()
        if self.reader is not self.db:
            with self.read_lock:
                self.reader.close()


class EmbeddedProducer(LogProducer):
    """A handle on the log's shared writer; `flush` waits for every record queued before it."""

    def __init__(self, log: EmbeddedTaskLog) -> None:
        self._log = log

    def send(
        self, key: RecordKey, value: bytes, *, on_durable: Callable[[], object] | None = None
    ) -> Future[int]:
        future = DeliveryFuture(on_durable)
        self._log.append(key, value, future)
        return future

    def send_many(self, records: Sequence[tuple[RecordKey, bytes]]) -> Future[int]:
        """Queue the whole batch behind one `BatchFuture`: no future per record."""
        batch = BatchFuture(len(records))
        for key, value in records:
            self._log.append(key, value, batch)
        return batch.future

    def flush(self, timeout: float) -> int:
        return self._log.writer.wait_written(timeout)

    def close(self) -> None:
        self.flush(timeout=60.0)
