"""The embedded task store: one SQLite file with the key structure of the Cassandra tables.

`schedule` and `status` are keyed by `(partition, bucket, scheduled_ms, ordering_id,
uniqueness_key)` WITHOUT ROWID, clustered as in a Cassandra partition, so the engine exercises
the same access paths in both modes; an index without the bucket lets `load_tasks` read forward
from the cursor with a row-value range, finding rows of every age without walking buckets.

Concurrency: a connection per reading thread (WAL readers never block each other); this
process's writers queue on one lock rather than in SQLite's busy handler, whose sleeps add
milliseconds; `busy_timeout` still covers another process (the CLI) writing. `close` waits for
the reads and the write running on other threads before it closes their connections (sqlite3
can crash the process when a connection is closed under a statement); a read or write that
starts after it raises `BackendUnavailableError`.

Durability: WAL with `synchronous=NORMAL`: a commit survives a crash or kill -9 of the process,
not a power loss or OS crash.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from scheduler._sqlbatch import chunks, many_keys, many_rows
from scheduler._sqlite_open import file_identity, open_wal, rollback, unavailable
from scheduler.errors import BackendUnavailableError, ConfigurationError, StoreReplacedError
from scheduler.model import (
    Attempt,
    ScheduleCursor,
    StoredTask,
    Task,
    TaskKey,
    TaskState,
    TaskStatus,
)
from scheduler.stores._group_commit import GroupCommit
from scheduler.stores.abc import (
    MalformedRecord,
    TaskStore,
    TaskView,
    decode_attempt,
    encode_attempt,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedule (
    partition INTEGER NOT NULL, bucket INTEGER NOT NULL, scheduled_ms INTEGER NOT NULL,
    ordering_id TEXT NOT NULL, uniqueness_key TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (partition, bucket, scheduled_ms, ordering_id, uniqueness_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS schedule_by_time
    ON schedule (partition, scheduled_ms, ordering_id, uniqueness_key);
CREATE TABLE IF NOT EXISTS status (
    partition INTEGER NOT NULL, bucket INTEGER NOT NULL, scheduled_ms INTEGER NOT NULL,
    ordering_id TEXT NOT NULL, uniqueness_key TEXT NOT NULL, state TEXT NOT NULL,
    attempts INTEGER NOT NULL, last_error TEXT, next_attempt_ms INTEGER,
    updated_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, data TEXT,
    PRIMARY KEY (partition, bucket, scheduled_ms, ordering_id, uniqueness_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS status_by_time
    ON status (partition, scheduled_ms, ordering_id, uniqueness_key);
CREATE INDEX IF NOT EXISTS status_by_expiry ON status (expires_ms);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS attempts (
    partition INTEGER NOT NULL, bucket INTEGER NOT NULL, scheduled_ms INTEGER NOT NULL,
    ordering_id TEXT NOT NULL, uniqueness_key TEXT NOT NULL, attempt INTEGER NOT NULL,
    started_ms INTEGER, ended_ms INTEGER, outcome TEXT NOT NULL, exit_code INTEGER, error TEXT,
    worker TEXT, log_path TEXT, expires_ms INTEGER NOT NULL,
    PRIMARY KEY (partition, bucket, scheduled_ms, ordering_id, uniqueness_key, attempt)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS attempts_by_expiry ON attempts (expires_ms);
CREATE TABLE IF NOT EXISTS malformed (
    partition INTEGER NOT NULL, log_offset INTEGER NOT NULL, reason TEXT NOT NULL, key BLOB,
    value BLOB, value_bytes INTEGER NOT NULL, timestamp_ms INTEGER NOT NULL,
    seen_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,
    PRIMARY KEY (partition, log_offset)
) WITHOUT ROWID;
"""

_STATUS_COLUMNS = "t.state, t.attempts, t.last_error, t.next_attempt_ms, t.updated_ms, t.data"
_JOIN_STATUS = (
    "LEFT JOIN status t ON t.partition = s.partition AND t.bucket = s.bucket"
    " AND t.scheduled_ms = s.scheduled_ms AND t.ordering_id = s.ordering_id"
    " AND t.uniqueness_key = s.uniqueness_key AND t.expires_ms > ?"
)
_KEY_WHERE = (
    "partition = ? AND bucket = ? AND scheduled_ms = ? AND ordering_id = ? AND uniqueness_key = ?"
)
_SELECT_JOINED = (
    f"SELECT s.scheduled_ms, s.ordering_id, s.uniqueness_key, s.data, {_STATUS_COLUMNS}"
    " FROM schedule s"
)
_LOAD_HEAD = (
    f"{_SELECT_JOINED} INDEXED BY schedule_by_time {_JOIN_STATUS}"
    " WHERE s.partition = ? AND s.scheduled_ms <= ?"
)
_LOAD_AFTER = (
    f"{_LOAD_HEAD} AND (s.scheduled_ms, s.ordering_id, s.uniqueness_key) > (?, ?, ?)"
    " ORDER BY s.scheduled_ms, s.ordering_id, s.uniqueness_key LIMIT ?"
)
_LOAD_KEY = f"{_SELECT_JOINED} {_JOIN_STATUS} WHERE s.{_KEY_WHERE.replace(' AND ', ' AND s.')}"
_LOAD_ALL = f"{_LOAD_HEAD} ORDER BY s.scheduled_ms, s.ordering_id, s.uniqueness_key LIMIT ?"
_FINAL = tuple(state.value for state in TaskState if state.is_final)
_FINAL_STATES = frozenset(state for state in TaskState if state.is_final)
_DUMPS = json.JSONEncoder(separators=(",", ":")).encode
"""Task data as the rows keep it (one encoder for the process: it holds no state)."""
_PURGE_INTERVAL_S = 60.0


class SqliteTaskStore(TaskStore):
    """Schedule and status rows in one SQLite file, safe for many partitions' threads at once."""

    def __init__(
        self,
        *,
        path: str,
        bucket_ms: int = 3_600_000,
        status_retention_s: float = 7 * 86400,
    ) -> None:
        if bucket_ms <= 0:
            raise ConfigurationError(f"bucket_ms must be positive, got {bucket_ms}")
        self.path = path
        self.bucket_ms = bucket_ms
        self.status_retention_ms = int(status_retention_s * 1000)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._group = GroupCommit(self._write, self._unavailable)
        self._next_purge = 0.0
        self._closed = True
        self._reads = threading.Condition(threading.Lock())
        self._reading = 0
        """Reads running now, on any thread; `close` waits for none to be left."""
        self._absolute = None if path in ("", ":memory:") else os.path.abspath(path)
        self._identity: str | None = None
        """The file's device and inode when this process first opened it (None: not yet, or in
        memory); its connections keep that file open even after it is deleted."""

    def open(self, *, create_schema: bool = True) -> None:
        with self._reads:
            self._closed = False
        if create_schema:
            with self._write_lock:
                self._connection().executescript(_SCHEMA)

    def close(self) -> None:
        with self._reads:
            self._closed = True  # reads starting from now are refused
            self._reads.wait_for(lambda: self._reading == 0)
        with self._write_lock:  # the write running commits first
            self._identity = None  # opened again, it takes the file then at the path
            with self._connections_lock:
                connections, self._connections = self._connections, []
            for connection in connections:
                connection.close()
            self._local = threading.local()
            self._writer = None

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection, for reads."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._connect()
        return connection

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise self._closed_error()
        try:
            # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE in _write).
            connection = open_wal(
                self.path,
                synchronous="NORMAL",
                cached_statements=256,  # the chunked writes use up to 9 sizes per statement
            )
            connection.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        except sqlite3.Error as error:
            raise unavailable(f"cannot open task store {self.path!r}", error) from error
        with self._connections_lock:
            self._connections.append(connection)
            if self._identity is None and self._absolute is not None:
                self._identity = file_identity(self._absolute)
        return connection

    def check_replaced(self) -> None:
        if self._identity is None or self._absolute is None:
            return
        now = file_identity(self._absolute)
        if now == self._identity:
            return
        how = "deleted" if now is None else "deleted and made again"
        raise StoreReplacedError(
            f"the task store {self.path} was {how} while this process ran, and the tasks "
            "stored in it went with it; this process stops rather than go on writing to a file "
            "no other process sees. To store again what the log still keeps, start the worker "
            "with a new group (SCHEDULER_GROUP_ID): it reads the log from its first record kept "
            "(tasks that had finished run again). The same group is refused a new store: it "
            "has read past the records whose tasks were in the deleted file"
        )

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (IMMEDIATE: it never fails upgrading a read lock), on the one
        writer connection: SQLite drops a connection's page cache whenever another one has
        committed, so writes from a connection per thread began by re-reading their index pages
        (74 ms a persisted batch on average)."""
        with self._write_lock:
            connection = self._writer
            if connection is None:
                connection = self._writer = self._connect()
            try:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    yield connection
                except BaseException:
                    rollback(connection)
                    raise
                connection.execute("COMMIT")
            except sqlite3.OperationalError as error:
                raise self._unavailable(error) from error

    def _unavailable(self, error: sqlite3.Error) -> BackendUnavailableError:
        return unavailable(f"task store {self.path!r}", error)

    def _closed_error(self) -> BackendUnavailableError:
        return BackendUnavailableError(f"task store {self.path!r} is closed; call open() first")

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._reads:
            if self._closed:
                raise self._closed_error()
            self._reading += 1
        try:
            return self._connection().execute(sql, params).fetchall()
        except sqlite3.OperationalError as error:
            raise self._unavailable(error) from error
        finally:
            with self._reads:
                self._reading -= 1
                if self._reading == 0:
                    self._reads.notify_all()

    def _key_row(self, partition: int, key: TaskKey) -> tuple[int, int, int, str, str]:
        ms = key.scheduled_ms
        return (partition, ms // self.bucket_ms, ms, key.ordering_id, key.uniqueness_key)

    def read_meta(self, name: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE name = ?", (name,))
        return str(rows[0][0]) if rows else None

    def claim_meta(self, name: str, value: str) -> str:
        with self._write() as connection:
            connection.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)", (name, value)
            )
            row = connection.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return str(row[0])

    def together(self) -> AbstractContextManager[None]:
        return self._group.together()

    def write_tasks(self, partition: int, tasks: Sequence[Task]) -> None:
        rows = [(*self._key_row(partition, task.key), _DUMPS(task.data)) for task in tasks]
        self._group.run(many_rows("INSERT INTO schedule VALUES", rows, _UPSERT_DATA))

    def load_tasks(
        self, partition: int, after: ScheduleCursor | None, until_ms: int, limit: int
    ) -> list[StoredTask]:
        now = _now_ms()
        if after is None:
            rows = self._read(_LOAD_ALL, (now, partition, until_ms, limit))
        else:
            rows = self._read(_LOAD_AFTER, (now, partition, until_ms, *after, limit))
        return _stored(rows)

    def load_keys(self, partition: int, keys: Collection[TaskKey]) -> list[StoredTask]:
        now, rows = _now_ms(), []
        for key in sorted(set(keys)):
            rows += self._read(_LOAD_KEY, (now, *self._key_row(partition, key)))
        return _stored(rows)

    def delete_tasks(self, partition: int, keys: Collection[TaskKey]) -> None:
        rows = [self._key_row(partition, key) for key in keys]
        self._group.run(many_keys("DELETE FROM schedule WHERE", _KEY_WHERE, rows))

    def record_statuses(self, partition: int, statuses: Sequence[TaskStatus]) -> None:
        # Run by every partition's tracker for every task: each key's row values are made once
        # and shared by its status row, its attempt rows and its schedule-row delete.
        expires = _now_ms() + self.status_retention_ms
        bucket_ms = self.bucket_ms
        dumps = _DUMPS
        rows = []
        attempts = []
        finished = []
        for status in statuses:
            key = status.key
            ms = key.scheduled_ms
            key_row = (partition, ms // bucket_ms, ms, key.ordering_id, key.uniqueness_key)
            data = status.data
            state = status.state
            rows.append(
                (
                    *key_row,
                    state.value,
                    status.attempts,
                    status.last_error,
                    status.next_attempt_ms,
                    status.updated_ms,
                    expires,
                    None if data is None else "{}" if not data else dumps(data),
                )
            )
            for attempt in status.attempt_log:
                attempts.append((*key_row, *encode_attempt(attempt), expires))
            if state in _FINAL_STATES:
                finished.append(key_row)
        self._group.run(
            many_rows("INSERT OR REPLACE INTO status VALUES", rows)
            + many_rows("INSERT INTO attempts VALUES", attempts, _MERGE_ATTEMPT)
            + many_keys("DELETE FROM schedule WHERE", _KEY_WHERE, finished)
        )
        self._purge_expired()

    def fetch_statuses(
        self, partition: int, keys: Collection[TaskKey]
    ) -> dict[TaskKey, TaskStatus]:
        # One statement per chunk: the keys as a VALUES table joined on the primary key. A query
        # per key cost more than the rest of a task's trip through the engine.
        now = _now_ms()
        found: dict[TaskKey, TaskStatus] = {}
        for chunk in chunks(list(keys)):
            params: list[Any] = []
            for key in chunk:
                ms = key.scheduled_ms
                params += (ms // self.bucket_ms, ms, key.ordering_id, key.uniqueness_key)
            params += (partition, now)
            rows = self._read(_fetch_sql(len(chunk)), params)
            for ms, ordering_id, uniqueness_key, *status in rows:
                key = TaskKey.from_ms(ordering_id, ms, uniqueness_key)
                found[key] = _status(key, status)
        return found

    def delete_statuses(self, partition: int, keys: Collection[TaskKey]) -> None:
        rows = [self._key_row(partition, key) for key in keys]
        self._group.run(
            many_keys("DELETE FROM status WHERE", _KEY_WHERE, rows)
            + many_keys("DELETE FROM attempts WHERE", _KEY_WHERE, rows)
        )

    def attempts(self, partition: int, key: TaskKey) -> list[Attempt]:
        rows = self._read(
            f"SELECT {_ATTEMPT_COLUMNS} FROM attempts WHERE {_KEY_WHERE} AND expires_ms > ?"
            " ORDER BY attempt",
            (*self._key_row(partition, key), _now_ms()),
        )
        return [decode_attempt(row) for row in rows]

    def _purge_expired(self) -> None:
        """Delete expired status rows, at most once a minute (reads already skip them)."""
        now = time.monotonic()
        if now < self._next_purge:
            return
        self._next_purge = now + _PURGE_INTERVAL_S
        with self._write() as connection:
            for table in ("status", "malformed", "attempts"):
                connection.execute(f"DELETE FROM {table} WHERE expires_ms <= ?", (_now_ms(),))

    def list_tasks(
        self,
        partition: int,
        *,
        ordering_id: str | None = None,
        states: Collection[TaskState] | None = None,
        limit: int = 100,
        after: ScheduleCursor | None = None,
        from_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[TaskView]:
        wanted = None if states is None else [TaskState(state).value for state in states]
        if wanted == []:
            return []
        s_range, range_params = _time_range("s", after, from_ms, until_ms)
        t_range, _ = _time_range("t", after, from_ms, until_ms)
        now = _now_ms()
        s_params: list[Any] = [now, partition, *range_params]
        t_params: list[Any] = [partition, now, *_FINAL, *range_params]
        marks = ", ".join("?" * len(wanted or ()))
        if ordering_id is not None:
            # One id's rows are few and scattered over the partition: the filter is left to
            # the planner, which finds them through the key and sorts only them.
            sql = f"SELECT * FROM ({_union(s_range, t_range)}) WHERE ordering_id = ?"
            params = [*s_params, *t_params, ordering_id]
            if wanted is not None:
                sql += f" AND st IN ({marks})"
                params += wanted
        else:
            # Each half ordered and limited on its own (the by-time indexes serve both), so a
            # page reads about `limit` rows of each table; a union ordered only as a whole is
            # materialised and sorted whole: the whole partition for a page of 100.
            if wanted is not None:
                s_range += f" AND COALESCE(t.state, 'pending') IN ({marks})"
                t_range += f" AND t.state IN ({marks})"
                s_params += wanted
                t_params += wanted
            s_order = " ORDER BY s.scheduled_ms, s.ordering_id, s.uniqueness_key LIMIT ?"
            t_order = " ORDER BY t.scheduled_ms, t.ordering_id, t.uniqueness_key LIMIT ?"
            sql = _union(s_range, t_range, s_order, t_order)
            params = [*s_params, limit, *t_params, limit]
        sql += " ORDER BY scheduled_ms, ordering_id, uniqueness_key LIMIT ?"
        views = []
        for ms, oid, uk, task_data, _state, *status in self._read(sql, [*params, limit]):
            key = TaskKey.from_ms(oid, ms, uk)
            row_status = _status(key, status) if status[0] else None
            if task_data is not None:
                data = json.loads(task_data)
            else:
                data = dict(row_status.data) if row_status and row_status.data else {}
            views.append(TaskView(partition, Task.from_key(key, data), row_status))
        return views

    def count_due(self, partition: int, now_ms: int, *, after: ScheduleCursor | None = None) -> int:
        sql = (
            "SELECT count(*) FROM schedule INDEXED BY schedule_by_time"
            " WHERE partition = ? AND scheduled_ms <= ?"
        )
        if after is None:
            rows = self._read(sql, (partition, now_ms))
        else:
            sql += " AND (scheduled_ms, ordering_id, uniqueness_key) > (?, ?, ?)"
            rows = self._read(sql, (partition, now_ms, *after))
        return int(rows[0][0])

    def set_aside(self, records: Sequence[MalformedRecord]) -> None:
        expires = _now_ms() + self.status_retention_ms
        rows = [(r.partition, *r.columns(), expires) for r in records]
        if rows:
            self._group.run(many_rows("INSERT OR REPLACE INTO malformed VALUES", rows))

    def malformed_records(
        self, partition: int | None = None, *, from_offset: int = 0, limit: int = 100
    ) -> list[MalformedRecord]:
        columns = "partition, log_offset, reason, key, value, value_bytes, timestamp_ms, seen_ms"
        where, params = "expires_ms > ?", [_now_ms()]
        if partition is not None:
            where += " AND partition = ? AND log_offset >= ?"
            params += [partition, from_offset]
        rows = self._read(
            f"SELECT {columns} FROM malformed WHERE {where} ORDER BY partition, log_offset LIMIT ?",
            (*params, limit),
        )
        return [MalformedRecord(*row) for row in rows]

    def malformed_counts(self, limit: int) -> dict[int, int]:
        rows = self._read(
            "SELECT partition, COUNT(*) FROM (SELECT partition FROM malformed"
            " WHERE expires_ms > ? LIMIT ?) GROUP BY partition",
            (_now_ms(), limit),
        )
        return {partition: count for partition, count in rows}

    def drop_malformed(self, partition: int, offsets: Collection[int]) -> None:
        keys = [(partition, offset) for offset in offsets]
        if keys:
            match = "partition = ? AND log_offset = ?"
            self._group.run(many_keys("DELETE FROM malformed WHERE", match, keys))


_UPSERT_DATA = " ON CONFLICT DO UPDATE SET data = excluded.data"
_ATTEMPT_FIELDS = ("started_ms", "ended_ms", "exit_code", "error", "worker", "log_path")
_ATTEMPT_COLUMNS = "attempt, started_ms, ended_ms, outcome, exit_code, error, worker, log_path"
_MERGE_ATTEMPT = (
    " ON CONFLICT DO UPDATE SET outcome = excluded.outcome, expires_ms = excluded.expires_ms, "
    + ", ".join(f"{name} = COALESCE(excluded.{name}, {name})" for name in _ATTEMPT_FIELDS)
)
"""A record written again updates the stored one field by field: a None keeps what is there."""


_CACHE_KIB = 2 * 1024
"""Each connection's page cache: about SQLite's default. Measured with 64 MiB for the writer: no
faster, and a million-task drain peaked at 615 MB RSS instead of ~120 (`scheduler bench
backlog`); a reader's cache is dropped whenever the writer commits."""


@functools.lru_cache(maxsize=16)
def _fetch_sql(count: int) -> str:
    values = ",".join(["(?,?,?,?)"] * count)
    return (
        f"WITH k(bucket, scheduled_ms, ordering_id, uniqueness_key) AS (VALUES {values})"
        " SELECT t.scheduled_ms, t.ordering_id, t.uniqueness_key, t.state, t.attempts,"
        " t.last_error, t.next_attempt_ms, t.updated_ms, t.data"
        " FROM k CROSS JOIN status t ON t.partition = ? AND t.bucket = k.bucket"
        " AND t.scheduled_ms = k.scheduled_ms AND t.ordering_id = k.ordering_id"
        " AND t.uniqueness_key = k.uniqueness_key WHERE t.expires_ms > ?"
    )


def _stored(rows: Sequence[Sequence[Any]]) -> list[StoredTask]:
    """Schedule rows joined with their statuses (the load statements' columns)."""
    loads = json.loads
    result = []
    for ms, ordering_id, uniqueness_key, data, *status in rows:
        key = TaskKey.from_ms(ordering_id, ms, uniqueness_key)
        task = Task.from_key(key, loads(data))
        result.append(StoredTask(task, _status(key, status) if status[0] else None))
    return result


def _status(key: TaskKey, row: Sequence[Any]) -> TaskStatus:
    state, attempts, last_error, next_attempt_ms, updated_ms, data = row
    return TaskStatus(
        key=key,
        state=TaskState(state),
        attempts=attempts,
        last_error=last_error,
        next_attempt_ms=next_attempt_ms,
        updated_ms=updated_ms,
        data=None if data is None else json.loads(data),
    )


def _union(s_range: str, t_range: str, s_tail: str = "", t_tail: str = "") -> str:
    """The schedule rows (with their status) and the retained final status rows of one
    partition, each half restricted by its range (and followed by its tail)."""
    final_marks = ", ".join("?" * len(_FINAL))
    return (
        "SELECT * FROM (SELECT s.scheduled_ms, s.ordering_id, s.uniqueness_key, "
        f"s.data AS task_data, COALESCE(t.state, 'pending') AS st, {_STATUS_COLUMNS}"
        f" FROM schedule s {_JOIN_STATUS} WHERE s.partition = ?{s_range}{s_tail})"
        " UNION ALL "
        "SELECT * FROM (SELECT t.scheduled_ms, t.ordering_id, t.uniqueness_key, NULL, "
        f"t.state, {_STATUS_COLUMNS} FROM status t WHERE t.partition = ? AND t.expires_ms > ?"
        f" AND t.state IN ({final_marks}){t_range} AND NOT EXISTS ("
        "SELECT 1 FROM schedule s WHERE s.partition = t.partition AND s.bucket = t.bucket"
        " AND s.scheduled_ms = t.scheduled_ms AND s.ordering_id = t.ordering_id"
        f" AND s.uniqueness_key = t.uniqueness_key){t_tail})"
    )


def _time_range(
    table: str, after: ScheduleCursor | None, from_ms: int | None, until_ms: int | None
) -> tuple[str, list[Any]]:
    """SQL conditions (each starting with AND) on `table`'s key for `list_tasks`' range."""
    sql, params = "", list[Any]()
    if after is not None:
        columns = f"{table}.scheduled_ms, {table}.ordering_id, {table}.uniqueness_key"
        sql += f" AND ({columns}) > (?, ?, ?)"
        params += after
    if from_ms is not None:
        sql += f" AND {table}.scheduled_ms >= ?"
        params.append(from_ms)
    if until_ms is not None:
        sql += f" AND {table}.scheduled_ms < ?"
        params.append(until_ms)
    return sql, params


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
