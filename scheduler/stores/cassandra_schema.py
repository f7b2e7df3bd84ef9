"""CQL definitions of the Cassandra task store, kept apart from the code that runs them.

The tables and why they are keyed as they are: docs/cassandra.md (Tables, Why this key
structure). The schedule, status and task_attempts tables share one primary key, so a status row
and a task's attempts sit beside the schedule row they describe and are read with the same
partition key and clustering bounds. With `ordering_index`, `ordering_id` of schedule and status
carries a Storage-Attached Index (Cassandra 5.0), so a listing of one ordering id reads that id's
rows of a bucket, not the bucket's (docs/cassandra.md, Listings).

Nothing here imports the driver; `scheduler schema apply` and the tests can show the DDL as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from scheduler.errors import ConfigurationError
from scheduler.model import ScheduleCursor, Task, TaskKey, TaskState, TaskStatus

#: Cassandra's own rule for unquoted keyspace names (48 characters since 3.0).
_KEYSPACE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,47}")
_DC_NAME = re.compile(r"[A-Za-z0-9_.\-]+")

DEFAULT_REPLICATION: Mapping[str, Any] = {"class": "SimpleStrategy", "replication_factor": 1}


def check_keyspace(name: str) -> str:
    """Return `name` if Cassandra accepts it unquoted, else raise `ConfigurationError`."""
    if not _KEYSPACE_NAME.fullmatch(name):
        raise ConfigurationError(
            f"Cassandra keyspace name {name!r} is invalid; use a letter followed by up to 47 "
            "letters, digits or underscores (set SCHEDULER_CASSANDRA_KEYSPACE)"
        )
    return name.lower()


def replication_literal(replication: Mapping[str, Any]) -> str:
    """The CQL map literal of a replication setting, validated.

    SimpleStrategy needs `replication_factor`; NetworkTopologyStrategy takes one factor per data
    center (`{"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 3}`).
    """
    strategy = str(replication.get("class", ""))
    short = strategy.rsplit(".", 1)[-1]
    if short not in ("SimpleStrategy", "NetworkTopologyStrategy"):
        raise ConfigurationError(
            f"replication class {strategy!r} is not supported; use SimpleStrategy (one data "
            "center, tests) or NetworkTopologyStrategy with a factor per data center"
        )
    factors = {str(k): v for k, v in replication.items() if k != "class"}
    if short == "SimpleStrategy" and set(factors) != {"replication_factor"}:
        raise ConfigurationError(
            f"SimpleStrategy takes exactly one option, replication_factor; got {sorted(factors)}"
        )
    if short == "NetworkTopologyStrategy" and not factors:
        raise ConfigurationError(
            "NetworkTopologyStrategy needs a replication factor per data center, "
            'for example {"class": "NetworkTopologyStrategy", "dc1": 3}'
        )
    parts = [f"'class': '{short}'"]
    for name, factor in factors.items():
        if not _DC_NAME.fullmatch(name):
            raise ConfigurationError(f"data center name {name!r} in replication is invalid")
        try:
            count = int(factor)
        except (TypeError, ValueError):
            count = -1
        if count < 1 or str(count) != str(factor).strip():
            raise ConfigurationError(
                f"replication factor {factor!r} for {name!r} must be a positive whole number"
            )
        parts.append(f"'{name}': '{count}'")
    return "{" + ", ".join(parts) + "}"


def keyspace_ddl(keyspace: str, replication: Mapping[str, Any]) -> str:
    """CREATE KEYSPACE IF NOT EXISTS: an existing keyspace keeps its replication (changing the
    replication of live data needs a repair, an operator's decision, not a startup side effect)."""
    return (
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} "
        f"WITH replication = {replication_literal(replication)} AND durable_writes = true"
    )


def table_ddl(keyspace: str, status_retention_s: int, *, ordering_index: bool = False) -> list[str]:
    """CREATE TABLE IF NOT EXISTS statements, in the order they are applied; then, with
    `ordering_index`, the ordering-id indexes (`index_ddl`)."""
    # A TWCS window of about 1/20 of the retention keeps the SSTable count bounded while letting
    # fully expired windows be dropped without compaction.
    window_hours = max(1, status_retention_s // (20 * 3600))
    key = "PRIMARY KEY ((partition, bucket), scheduled_ms, ordering_id, uniqueness_key)"
    order = "CLUSTERING ORDER BY (scheduled_ms ASC, ordering_id ASC, uniqueness_key ASC)"
    columns = " partition int, bucket bigint, scheduled_ms bigint, ordering_id text, uniqueness_key"
    twcs = "compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': "
    twcs += f"'HOURS', 'compaction_window_size': '{window_hours}'}}"
    return [
        f"CREATE TABLE IF NOT EXISTS {keyspace}.schedule ({columns} text, data text, {key})"
        f" WITH {order}",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.status ({columns} text, state text, attempts int,"
        " last_error text, next_attempt_ms bigint, updated_ms bigint, data text,"
        f" {key}) WITH {order} AND {twcs}",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.task_attempts ({columns} text, attempt int,"
        " started_ms bigint, ended_ms bigint, outcome text, exit_code int, error text,"
        " worker text, log_path text,"
        " PRIMARY KEY ((partition, bucket), scheduled_ms, ordering_id, uniqueness_key, attempt))"
        " WITH CLUSTERING ORDER BY (scheduled_ms ASC, ordering_id ASC, uniqueness_key ASC,"
        f" attempt ASC) AND {twcs}",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.buckets ("
        " partition int, bucket bigint, PRIMARY KEY (partition, bucket))"
        " WITH CLUSTERING ORDER BY (bucket ASC)",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.status_buckets ("
        " partition int, bucket bigint, PRIMARY KEY (partition, bucket))"
        " WITH CLUSTERING ORDER BY (bucket ASC)",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.meta (name text PRIMARY KEY, value text)",
        # Malformed records by (partition, block of offsets): a producer writing garbage for
        # hours cannot grow one Cassandra partition without bound.
        f"CREATE TABLE IF NOT EXISTS {keyspace}.malformed ("
        " partition int, block bigint, log_offset bigint, reason text, key blob, value blob,"
        " value_bytes int, timestamp_ms bigint, seen_ms bigint,"
        " PRIMARY KEY ((partition, block), log_offset))"
        " WITH CLUSTERING ORDER BY (log_offset ASC)",
    ] + (index_ddl(keyspace) if ordering_index else [])


ORDERING_INDEXES = {"schedule": "schedule_ordering_id", "status": "status_ordering_id"}
"""The Storage-Attached Index on `ordering_id` of each table a listing joins, by table."""


def index_ddl(keyspace: str) -> list[str]:
    """CREATE CUSTOM INDEX IF NOT EXISTS statements of `ORDERING_INDEXES` (Cassandra 5.0's
    StorageAttachedIndex). A keyspace made without them gets them on its next `apply_schema`;
    Cassandra builds an index over the rows already stored in the background."""
    return [
        f"CREATE CUSTOM INDEX IF NOT EXISTS {name} ON {keyspace}.{table} (ordering_id)"
        " USING 'StorageAttachedIndex'"
        for table, name in ORDERING_INDEXES.items()
    ]


MALFORMED_BLOCK = 100_000
"""Offsets per Cassandra partition of the `malformed` table (`block = offset // this`)."""
_MALFORMED_COLUMNS = "log_offset, reason, key, value, value_bytes, timestamp_ms, seen_ms"


_COLUMNS = "scheduled_ms, ordering_id, uniqueness_key"
_STATUS_COLUMNS = f"{_COLUMNS}, state, attempts, last_error, next_attempt_ms, updated_ms, data"
_KEY = "partition = ? AND bucket = ?"
_ROW = f"{_KEY} AND scheduled_ms = ? AND ordering_id = ? AND uniqueness_key = ?"
_ATTEMPT_COLUMNS = "attempt, started_ms, ended_ms, outcome, exit_code, error, worker, log_path"
#: Filtering on `ordering_id` inside one Cassandra partition: through the ordering-id index
#: (`index_ddl`) the node reads that id's rows only and applies the `scheduled_ms` range to
#: them; without it, it reads the span's rows and sends only the id's (at most the LIMIT).
#: Never the whole table: every such statement restricts the partition key.
_FILTERING = "ALLOW FILTERING"
#: The rows after a cursor `(?, ?, ?)` scheduled before `?`; one ordering id's in a span of
#: scheduled time, filtered; and one id's after a uniqueness key in one millisecond.
_SPAN = f" AND ({_COLUMNS}) > (?, ?, ?) AND ({_COLUMNS}) < (?, '', '')"
_OF = f" AND scheduled_ms >= ? AND scheduled_ms < ? AND ordering_id = ? LIMIT ? {_FILTERING}"
_AT = " AND scheduled_ms = ? AND ordering_id = ? AND uniqueness_key > ? LIMIT ?"
#: Stored for an absent next_attempt_ms; an empty string stands for an absent last_error or data.
NO_TIME = -1


def slices(
    after: ScheduleCursor, below_ms: int, width_ms: int
) -> Iterator[tuple[ScheduleCursor, int]]:
    """The (after, below) bounds of the reads that cover the rows after the cursor `after` and
    scheduled before `below_ms`, each at most `width_ms` of scheduled time wide (aligned to
    multiples of it): Cassandra scans every tombstone between a read's bounds and refuses a read
    past `tombstone_failure_threshold`, which hours of completed tasks in one query could hit."""
    while after[0] < below_ms:
        upper = min(below_ms, (after[0] // width_ms + 1) * width_ms)
        yield after, upper
        after = (upper, "", "")


def statements(ks: str) -> dict[str, str]:
    """The store's queries by name, to be prepared once per session.

    Bounds `< (hi, '', '')` and `> (lo, '', '')` mean exactly `scheduled_ms < hi` and
    `scheduled_ms >= lo`, since no key has an empty ordering id. The listing scans take a whole
    cursor as lower bound (a page resumes right after its last row) and a LIMIT. A listing of one
    ordering id cannot restrict `ordering_id` beside a tuple bound, so it reads the rest of the
    cursor's millisecond by key (`*_at`) and the span after it filtered (`*_of`)."""
    tasks = f"SELECT {_COLUMNS}, data FROM {ks}.schedule WHERE {_KEY}"
    statuses = f"SELECT {_STATUS_COLUMNS} FROM {ks}.status WHERE {_KEY}"
    return {
        "write": f"INSERT INTO {ks}.schedule (partition, bucket, {_COLUMNS}, data)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        "delete": f"DELETE FROM {ks}.schedule WHERE {_ROW}",
        "load_after": f"{tasks}{_SPAN} LIMIT ?",
        "load_in": f"{tasks} AND ({_COLUMNS}) IN ?",
        "probe": f"SELECT scheduled_ms FROM {ks}.schedule WHERE {_KEY}"
        f" AND ({_COLUMNS}) > (?, '', '') AND ({_COLUMNS}) < (?, '', '') LIMIT 1",
        "count_after": f"SELECT COUNT(*) FROM {ks}.schedule WHERE {_KEY}{_SPAN}",
        "scan_of": tasks + _OF,
        "scan_at": tasks + _AT,
        "index": f"INSERT INTO {ks}.buckets (partition, bucket) VALUES (?, ?)",
        "unindex": f"DELETE FROM {ks}.buckets WHERE {_KEY}",
        "buckets": f"SELECT bucket FROM {ks}.buckets WHERE partition = ?"
        " AND bucket >= ? AND bucket <= ?",
        "status_index": f"INSERT INTO {ks}.status_buckets (partition, bucket)"
        " VALUES (?, ?) USING TTL ?",
        "status_buckets": f"SELECT bucket FROM {ks}.status_buckets WHERE partition = ?",
        "status_write": f"INSERT INTO {ks}.status (partition, bucket, {_STATUS_COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?",
        "status_delete": f"DELETE FROM {ks}.status WHERE {_ROW}",
        "status_in": f"{statuses} AND ({_COLUMNS}) IN ?",
        "status_range": f"{statuses} AND ({_COLUMNS}) >= (?, ?, ?)"
        f" AND ({_COLUMNS}) <= (?, ?, ?) LIMIT ?",
        "status_scan": f"{statuses}{_SPAN} LIMIT ?",
        "status_scan_of": statuses + _OF,
        "status_scan_at": statuses + _AT,
        "attempt_write": f"INSERT INTO {ks}.task_attempts (partition, bucket, {_COLUMNS},"
        f" {_ATTEMPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?",
        "attempts_read": f"SELECT {_ATTEMPT_COLUMNS} FROM {ks}.task_attempts WHERE {_ROW}",
        "attempts_delete": f"DELETE FROM {ks}.task_attempts WHERE {_ROW}",
        "meta_get": f"SELECT value FROM {ks}.meta WHERE name = ?",
        "meta_claim": f"INSERT INTO {ks}.meta (name, value) VALUES (?, ?) IF NOT EXISTS",
        "malformed_write": f"INSERT INTO {ks}.malformed (partition, block, {_MALFORMED_COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?",
        "malformed_blocks": f"SELECT DISTINCT partition, block FROM {ks}.malformed",
        "malformed_read": f"SELECT {_MALFORMED_COLUMNS} FROM {ks}.malformed"
        " WHERE partition = ? AND block = ? AND log_offset >= ? LIMIT ?",
        "malformed_offsets": f"SELECT log_offset FROM {ks}.malformed"
        " WHERE partition = ? AND block = ? LIMIT ?",
        "malformed_delete": f"DELETE FROM {ks}.malformed"
        " WHERE partition = ? AND block = ? AND log_offset = ?",
    }


def encode_status(status: TaskStatus) -> tuple[Any, ...]:
    """Status column values after (partition, bucket): sentinels rather than nulls, because a
    null in an INSERT writes a cell tombstone, and three per status write add up in reads."""
    key = status.key
    return (
        key.scheduled_ms,
        key.ordering_id,
        key.uniqueness_key,
        status.state.value,
        status.attempts,
        status.last_error or "",
        NO_TIME if status.next_attempt_ms is None else status.next_attempt_ms,
        status.updated_ms,
        "" if status.data is None else json.dumps(status.data, separators=(",", ":")),
    )


def decode_task(row: tuple[Any, ...]) -> Task:
    """A schedule row as read by the `load_*` and `scan*` statements."""
    ms, ordering_id, uniqueness_key, data = row
    return Task.from_key(TaskKey.from_ms(ordering_id, ms, uniqueness_key), json.loads(data))


def decode_status(row: tuple[Any, ...]) -> TaskStatus:
    """A status row as read by the `status_in` and `status_scan` statements."""
    ms, ordering_id, uniqueness_key, state, attempts, error, next_ms, updated_ms, data = row
    return TaskStatus(
        key=TaskKey.from_ms(ordering_id, ms, uniqueness_key),
        state=TaskState(state),
        attempts=attempts or 0,
        last_error=error or None,
        next_attempt_ms=None if next_ms is None or next_ms == NO_TIME else next_ms,
        updated_ms=updated_ms or 0,
        data=json.loads(data) if data else None,
    )
