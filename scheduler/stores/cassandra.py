"""The Cassandra task store: the seed's wide rows, read forward so tombstones stay behind.

Tables and why they are keyed as they are: `cassandra_schema` and docs/cassandra.md.

* A load walks the `buckets` index from the cursor's bucket and reads each bucket with clustering
  bounds `> cursor`, so rows deleted behind the cursor (tombstones) are never scanned again; each
  range read spans at most `read_slice_ms` (`schema.slices`), so one query never scans a whole
  bucket's tombstones (Cassandra refuses a read past `tombstone_failure_threshold`).
* Writes group rows of one Cassandra partition into small UNLOGGED batches, run concurrently: the
  driver's cost is per request, not per row.
* Status rows are joined by reading the same slice of the status table, capped; past the cap the
  rest are fetched by a multi-column `IN`.
* Index rows of long-past empty buckets are pruned when a load reads through them; the in-memory
  index cache is trusted only while a bucket is recent (`_PRUNE_AGE_MS`).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar, Literal

from cassandra.query import UNSET_VALUE, PreparedStatement

from scheduler.errors import BackendUnavailableError, ConfigurationError
from scheduler.model import (
    Attempt,
    ScheduleCursor,
    StoredTask,
    Task,
    TaskKey,
    TaskState,
    TaskStatus,
)
from scheduler.stores import _cassandra_admin as admin
from scheduler.stores import _cassandra_session as driver
from scheduler.stores import cassandra_schema as schema
from scheduler.stores._cassandra_session import (
    TRANSIENT,
    Item,
    Params,
    Runner,
    Write,
    consistency_level,
    open_runner,
    statement_batches,
    unit_batches,
)
from scheduler.stores._retry import RetryPolicy
from scheduler.stores.abc import (
    MalformedRecord,
    TaskStore,
    TaskView,
    decode_attempt,
    encode_attempt,
)
from scheduler.stores.cassandra_security import Credentials, TlsOptions

log = logging.getLogger(__name__)

_INDEX_BUILDING = "INDEX_NOT_AVAILABLE"
"""In the error of a read through an index the node has not built yet."""

#: A bucket's index row is pruned only once the bucket ended this long ago; the in-memory cache
#: vouches for one only while its bucket ended less than half that long ago (the gap absorbs
#: clock skew between a worker that cached an entry and one that pruned it meanwhile).
_PRUNE_AGE_MS = 3_600_000
_CACHE_TRUST_MS = _PRUNE_AGE_MS // 2
_STATUS_INDEX_SLACK_S = 3600  # see record_statuses
_CACHE_LIMIT = 10_000  # entries per cache before useless ones are swept out
_MAX_TTL_S = 630_720_000  # Cassandra's limit: 20 years
_IN_CHUNK = 100  # keys per multi-column IN; keeps each read small and its coordinator quick
_MIN_BUCKET = -(2**63)
_RECONNECT_AFTER_S = 10.0
"""With every node down this long, the store connects anew (see `_unavailable`), at most this
often (the driver's own reconnections wait at most 5 s between tries)."""
_ONE_TRY = RetryPolicy(attempts=1)


def _some_node_up(cluster: Any) -> bool:
    """Whether the driver holds a connection to any node, from what it knows already."""
    return any(host.is_up for host in cluster.metadata.all_hosts())


def ttl_of(seconds: float) -> int:
    """A retention as a TTL: whole seconds, at most Cassandra's limit of 20 years."""
    return min(_MAX_TTL_S, math.ceil(seconds))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _latest(statuses: Sequence[TaskStatus]) -> dict[TaskKey, TaskStatus]:
    """The last status of each key, carrying the attempt records of the earlier ones too (the
    later winning field by field): concurrent writes of one row would race."""
    latest: dict[TaskKey, TaskStatus] = {}
    for status in statuses:
        earlier = latest.get(status.key)
        if earlier is not None and earlier.attempt_log:
            status = status.with_attempts(earlier.attempt_log)
        latest[status.key] = status
    return latest


class CassandraTaskStore(TaskStore):
    """Schedule and status rows in Cassandra, for the distributed mode."""

    retry_policy: ClassVar[RetryPolicy] = RetryPolicy()
    """Retries of transient errors; tests shorten it."""

    def __init__(
        self,
        *,
        hosts: Sequence[str],
        port: int = 9042,
        keyspace: str = "scheduler",
        bucket_ms: int = 3_600_000,
        read_slice_ms: int = 60_000,
        replication: Mapping[str, Any] | None = None,
        consistency: str = "LOCAL_QUORUM",
        local_dc: str | None = None,
        status_retention_s: float = 7 * 86400,
        ordering_index: bool | Literal["auto"] = "auto",
        connect_timeout_s: float = 10,
        request_timeout_s: float = 10,
        credentials: Credentials | None = None,
        tls: TlsOptions | None = None,
    ) -> None:
        if not hosts:
            raise ConfigurationError("no Cassandra hosts given; set SCHEDULER_CASSANDRA_HOSTS")
        positive = dict(
            bucket_ms=bucket_ms, read_slice_ms=read_slice_ms, status_retention_s=status_retention_s
        )
        for name, value in positive.items():
            if value <= 0:
                raise ConfigurationError(f"{name} must be positive, got {value!r}")
        self.hosts = list(hosts)
        self.port = port
        self.credentials = credentials
        self.tls = tls
        if tls is not None:
            tls.context()  # unreadable files are a configuration error now, not at first open
        self.keyspace = schema.check_keyspace(keyspace)
        self.bucket_ms = bucket_ms
        self.read_slice_ms = read_slice_ms
        """Widest span of scheduled time one range read covers (see `schema.slices`)."""
        self.ordering_index_setting = ordering_index
        """True, False, or "auto": the indexes on a node of Cassandra 5.0 or later (SAI)."""
        self.ordering_index = ordering_index is True
        """Whether `apply_schema` creates the ordering-id indexes (`schema.index_ddl`), and a
        listing of one ordering id reads a whole bucket per query through them ("auto":
        resolved when the store opens)."""
        self.replication = dict(replication or schema.DEFAULT_REPLICATION)
        schema.replication_literal(self.replication)  # validate now, not at first open
        self.consistency = consistency_level(consistency)
        """The driver's value of the consistency level of every read and write."""
        self.local_dc = local_dc
        self.ttl_s = ttl_of(status_retention_s)
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        # Schema changes wait for every node to agree; that takes longer than a query.
        self._ddl_timeout_s = max(request_timeout_s, 60.0)
        self._cluster: Any = None
        self._run: Runner | None = None
        self._q: dict[str, PreparedStatement] = {}
        self._lock = threading.Lock()
        self._reconnecting = threading.Lock()
        self._down_since: float | None = None
        """When a failed statement first found every node down (None: some node was up)."""
        self._refused: BackendUnavailableError | None = None
        """Why the last new connection was refused, said for every statement until one works."""
        self._indexed: dict[int, set[int]] = defaultdict(set)
        self._status_indexed: dict[tuple[int, int], float] = {}  # -> expiry of the index row
        self._claimed: dict[str, str] = {}
        """Meta values this store read or claimed, claimed again once the keyspace is back
        after a drop: a worker restarted later would otherwise find a store that looks unused
        (`runtime.new_store_check`) although workers have written to it ever since."""
        self._claims_lost = False

    @property
    def target(self) -> str:
        return ", ".join(f"{host}:{self.port}" for host in self.hosts)

    def open(self, *, create_schema: bool = True) -> None:
        connects = self._run is None
        self._runner(connect_if_needed=True)
        try:
            self._open_schema(create_schema=create_schema)
        except BaseException:
            # The caller gets no store to close: the connection made here would stay open until
            # the driver's exit hook, whose scheduler thread then prints a traceback ("cannot
            # schedule new futures after shutdown") if a metadata refresh falls due meanwhile.
            if connects:
                self.close()
            raise

    def _open_schema(self, *, create_schema: bool) -> None:
        if create_schema:
            self.apply_schema()
        else:
            self._q = self._statements(self._runner())
            if self.ordering_index_setting == "auto":
                # A store that does not make the schema lists through the indexes if they exist.
                self.ordering_index = driver.has_ordering_indexes(
                    self._runner(), self.keyspace, schema.ORDERING_INDEXES.values()
                )

    def _open_runner(self, policy: RetryPolicy) -> tuple[Any, Runner]:
        cluster, run = open_runner(self, policy)
        run.on_schema_gone = self._forget_indexes
        run.on_unavailable = self._unavailable
        return cluster, run

    def _unavailable(self, failing: Runner) -> BaseException | None:
        """After a statement failed for good on unreachable nodes: connect anew once every node
        has been down for `_RECONNECT_AFTER_S`, and say why a new connection is refused. The
        driver's reconnections give up for good on a refused login (`AuthenticationFailed`), so
        a password changed while a node restarted would leave the store down for ever; the
        failing statement still fails, and its caller retries it on the new connection."""
        cluster = self._cluster
        if failing is not self._run or cluster is None:
            return None  # closed, or connected anew already
        if _some_node_up(cluster):
            self._down_since = self._refused = None
            return None
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        if now - self._down_since < _RECONNECT_AFTER_S:
            return self._refused
        if not self._reconnecting.acquire(blocking=False):
            return self._refused  # another thread is connecting; this one's caller retries
        try:
            self._down_since = now  # the next try, if this one fails, after as long again
            fresh, run = self._open_runner(_ONE_TRY)
            try:
                prepared = self._statements(run)
            except BaseException:
                fresh.shutdown()
                raise
        except ConfigurationError as refused:  # the login or the TLS handshake
            self._refused = BackendUnavailableError(
                f"{refused}. The store connects again every {_RECONNECT_AFTER_S:.0f} s and "
                "loses nothing meanwhile (a worker's records wait in the log); once the setting "
                "is changed, restart the process, which reads it at start, or have the cluster "
                "accept the login again"
            )
            return self._refused
        except BackendUnavailableError:
            self._refused = None
            return None  # the nodes are still away, as the failing statement says
        finally:
            self._reconnecting.release()
        self._cluster, self._run, self._q = fresh, run, prepared
        self._down_since = self._refused = None
        log.warning(
            "connected to Cassandra at %s anew, after its nodes had all been down for %.0f s "
            "or more",
            self.target,
            _RECONNECT_AFTER_S,
        )
        cluster.shutdown()
        return None

    def problem(self) -> str | None:
        cluster = self._cluster
        if cluster is None or _some_node_up(cluster):
            return None
        if self._refused is not None:
            return str(self._refused)
        return (
            f"no Cassandra node at {self.target} answers: the store retries with backoff and "
            "loses nothing meanwhile (a worker's records wait in the log); if this lasts, check "
            "that the nodes are up and reachable from here"
        )

    def _forget_indexes(self) -> None:
        """The keyspace or a table was dropped, and the index rows these caches vouch for with
        it: kept, they would let rows written after `schema apply` go without index rows."""
        with self._lock:
            self._indexed.clear()
            self._status_indexed.clear()
            self._claims_lost = bool(self._claimed)

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.shutdown()
        self._cluster = self._run = None
        self._q = {}

    def apply_schema(self) -> str:
        """Create the keyspace and tables if missing (idempotent), then prepare statements;
        the keyspace's replication as Cassandra has it (a CQL map literal). Connects first if
        `open()` was not called (`scheduler schema apply`; call `close()` afterwards). An
        existing keyspace keeps its replication (changing it needs a repair): a mismatch is
        logged."""
        run = self._runner(connect_if_needed=True)
        if self.ordering_index_setting == "auto":
            # SAI exists from Cassandra 5.0: a 4.x node would refuse the index and the start.
            self.ordering_index = driver.release_major(run) >= 5
        ddl = [schema.keyspace_ddl(self.keyspace, self.replication)]
        ddl += schema.table_ddl(self.keyspace, self.ttl_s, ordering_index=self.ordering_index)
        driver.apply_schema(run, ddl, timeout=self._ddl_timeout_s)
        existing = driver.replication_of(run, self.keyspace)
        wanted = schema.replication_literal(self.replication)
        actual = schema.replication_literal(existing) if existing else wanted
        if actual != wanted:
            log.warning(
                "keyspace %s exists with replication %s, not the configured %s; left unchanged "
                "(ALTER KEYSPACE, then run a repair, to change it)",
                *(self.keyspace, actual, wanted),
            )
        self._q = self._statements(self._runner(), expect_tables=True)
        return actual

    def drop_keyspace(self) -> None:
        """Drop the keyspace and everything in it (tests, and `scheduler schema drop`)."""
        run = self._runner(connect_if_needed=True)
        run.result(
            f"DROP KEYSPACE IF EXISTS {self.keyspace}", None, "drop", timeout=self._ddl_timeout_s
        )
        self._q = {}
        self._forget_indexes()

    def _runner(self, *, connect_if_needed: bool = False) -> Runner:
        """The open statement runner (also of the stores that share this connection)."""
        if self._run is None and connect_if_needed:
            self._cluster, self._run = self._open_runner(self.retry_policy)
        if self._run is None:
            raise BackendUnavailableError("the Cassandra task store is not open; call open()")
        return self._run

    def _statements(
        self, run: Runner, *, expect_tables: bool = False
    ) -> dict[str, PreparedStatement]:
        """The store's statements, prepared on `run`'s session (`expect_tables`: the schema was
        just applied, so tables a node does not know yet are waited for)."""
        return driver.prepare(
            run, self.keyspace, schema.statements(self.keyspace), expect_tables=expect_tables
        )

    def read_meta(self, name: str) -> str | None:
        rows = self._runner().one(self._q["meta_get"], (name,), f"read meta {name!r}")
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

    def claim_meta(self, name: str, value: str) -> str:
        run = self._runner()
        # A plain read first: once the value is pinned, workers start without a Paxos round,
        # which needs a quorum of every DC and would fail during a DC outage.
        stored = self.read_meta(name)
        if stored is not None:
            self._claimed[name] = stored
            return stored
        result = run.result(self._q["meta_claim"], (name, value), f"claim meta {name!r}")
        claimed = value if result.was_applied else str(driver.stored_value(result, "value"))
        self._claimed[name] = claimed
        return claimed

    def write_tasks(self, partition: int, tasks: Sequence[Task]) -> None:
        latest = {task.key: task for task in tasks}  # concurrent upserts of one key would race
        if not latest:
            return
        q, dumps = self._q, json.JSONEncoder(separators=(",", ":")).encode
        rows = [(*self._row_key(partition, key), dumps(task.data)) for key, task in latest.items()]
        unindexed = self._unindexed(partition, {row[1] for row in rows})
        # Index rows go first in the same concurrent run; the call returns only when all rows
        # are written, and a caller that sees an error writes the batch again.
        items: list[Item] = [(q["index"], (partition, bucket)) for bucket in unindexed]
        items += statement_batches([(q["write"], row) for row in rows])
        self._runner().many(items, f"write {len(rows)} tasks of partition {partition}")
        with self._lock:
            self._indexed[partition].update(unindexed)
            reclaim, self._claims_lost = self._claims_lost, False
        if reclaim:  # the keyspace is back (`schema apply`): it holds our data again
            try:
                for name, value in list(self._claimed.items()):
                    self.claim_meta(name, value)
            except BaseException:
                with self._lock:
                    self._claims_lost = True  # the next write tries again
                raise

    def _unindexed(self, partition: int, buckets: Iterable[int]) -> list[int]:
        trusted_after = _now_ms() - _CACHE_TRUST_MS
        with self._lock:
            cached = self._indexed[partition]
            if len(cached) > _CACHE_LIMIT:  # forget entries too old to be trusted anyway
                cached.difference_update(
                    [b for b in cached if (b + 1) * self.bucket_ms <= trusted_after]
                )
            return sorted(
                b for b in buckets if b not in cached or (b + 1) * self.bucket_ms <= trusted_after
            )

    def load_tasks(
        self, partition: int, after: ScheduleCursor | None, until_ms: int, limit: int
    ) -> list[StoredTask]:
        if limit <= 0 or (after is not None and after[0] > until_ms):
            return []
        run, q, width = self._runner(), self._q, self.bucket_ms
        found: dict[int, list[Task]] = {}
        count = 0
        for bucket, lower, below in self._reads(
            partition, after, until_ms, "read the bucket index"
        ):
            start, end = bucket * width, (bucket + 1) * width
            rows: list[tuple[Any, ...]] = []
            for bounds in schema.slices(lower, below, self.read_slice_ms):
                wanted = limit - count - len(rows)
                params: Params = (partition, bucket, *bounds[0], bounds[1], wanted)
                rows += run.one(q["load_after"], params, "load tasks")
                if len(rows) >= limit - count:
                    break
            whole = lower == (start, "", "") and below == end
            if not rows and whole and end <= _now_ms() - _PRUNE_AGE_MS:
                self._prune(partition, bucket)
            if rows:
                found[bucket] = [schema.decode_task(row) for row in rows]
                count += len(rows)
            if count >= limit:
                break
        statuses = self._joined_statuses(partition, found)
        return [StoredTask(task, statuses.get(task.key)) for ts in found.values() for task in ts]

    def _reads(
        self, partition: int, after: ScheduleCursor | None, until_ms: int, what: str
    ) -> list[tuple[int, ScheduleCursor, int]]:
        """The buckets the index lists from the cursor's bucket (all if `after` is None) to
        `until_ms`'s, each with the bounds of its rows after `after` and at or before
        `until_ms`: the first bucket's read starts from the cursor, so that the tombstones
        behind it are not read, the others' from their start."""
        width = self.bucket_ms
        first = after[0] // width if after is not None else _MIN_BUCKET
        indexed = self._runner().one(
            self._q["buckets"], (partition, first, until_ms // width), what
        )
        reads = []
        for (bucket,) in indexed:
            lower: ScheduleCursor = (bucket * width, "", "")
            lower = lower if after is None else max(lower, after)
            reads.append((bucket, lower, min(until_ms + 1, (bucket + 1) * width)))
        return reads

    def load_keys(self, partition: int, keys: Collection[TaskKey]) -> list[StoredTask]:
        items: list[Item] = [
            (self._q["load_in"], (partition, bucket, cursors))
            for bucket, cursors in self._by_bucket(keys)
        ]
        found = self._runner().many(items, "load tasks by key")
        tasks = [schema.decode_task(row) for rows in found for row in rows]
        tasks.sort(key=lambda task: task.key)
        statuses = self.fetch_statuses(partition, [task.key for task in tasks]) if tasks else {}
        return [StoredTask(task, statuses.get(task.key)) for task in tasks]

    def _by_bucket(self, keys: Iterable[TaskKey]) -> list[tuple[int, list[ScheduleCursor]]]:
        """Distinct keys' cursors by bucket, in chunks of at most `_IN_CHUNK` for one IN."""
        by_bucket: dict[int, list[ScheduleCursor]] = defaultdict(list)
        for key in set(keys):
            by_bucket[key.scheduled_ms // self.bucket_ms].append(key.cursor)
        return [
            (bucket, cursors[start : start + _IN_CHUNK])
            for bucket, cursors in by_bucket.items()
            for start in range(0, len(cursors), _IN_CHUNK)
        ]

    def _joined_statuses(
        self, partition: int, found: Mapping[int, Sequence[Task]]
    ) -> dict[TaskKey, TaskStatus]:
        """Status rows of loaded tasks: per bucket, one slice over the key range just loaded,
        which normally holds only the few tasks that started. The slice is capped at about twice
        the rows loaded; past the cap (a restart among many retained statuses of completed
        tasks) the remaining keys are looked up by IN instead of reading on."""
        caps = {bucket: 2 * len(tasks) + 16 for bucket, tasks in found.items()}
        items: list[Item] = [
            (
                self._q["status_range"],
                (partition, b, *ts[0].key.cursor, *ts[-1].key.cursor, caps[b]),
            )
            for b, ts in found.items()
        ]
        statuses: dict[TaskKey, TaskStatus] = {}
        rest: list[TaskKey] = []
        for (bucket, tasks), rows in zip(
            found.items(), self._runner().many(items, "read statuses"), strict=True
        ):
            decoded = [schema.decode_status(row) for row in rows]
            statuses.update((status.key, status) for status in decoded)
            if len(rows) == caps[bucket]:
                rest += [task.key for task in tasks if task.key > decoded[-1].key]
        if rest:
            statuses.update(self.fetch_statuses(partition, rest))
        return statuses

    def _prune(self, partition: int, bucket: int) -> None:
        """Drop a long-past bucket from the index once a read at ALL confirms it is empty: a
        lagging replica must not make us forget a bucket that still holds a row. Best effort;
        a bucket that cannot be confirmed now is confirmed on a later pass."""
        with self._lock:
            self._indexed[partition].discard(bucket)
        session, width = self._runner().session, self.bucket_ms
        spans = schema.slices((bucket * width, "", ""), (bucket + 1) * width, self.read_slice_ms)
        try:
            if all(
                session.execute(self._q["probe"], (partition, bucket, lo[0], hi)).one() is None
                for lo, hi in spans
            ):
                session.execute(self._q["unindex"], (partition, bucket))
                log.debug("pruned empty bucket %d of partition %d", bucket, partition)
        except TRANSIENT as error:
            log.debug("bucket %d of partition %d not pruned: %r", bucket, partition, error)

    def delete_tasks(self, partition: int, keys: Collection[TaskKey]) -> None:
        rows = [self._row_key(partition, key) for key in set(keys)]
        items = statement_batches([(self._q["delete"], row) for row in rows])
        self._runner().many(items, f"delete {len(rows)} tasks of partition {partition}")

    def _row_key(self, partition: int, key: TaskKey) -> Params:
        bucket = key.scheduled_ms // self.bucket_ms
        return (partition, bucket, key.scheduled_ms, key.ordering_id, key.uniqueness_key)

    def record_statuses(self, partition: int, statuses: Sequence[TaskStatus]) -> None:
        latest = _latest(statuses)
        if not latest:
            return
        q, ttl_s, now_s = self._q, self.ttl_s, time.time()
        buckets: set[int] = set()
        # Each task's status row, attempt rows and, once final, the delete of its schedule row
        # go in one single-partition batch (one mutation on each replica): the schedule row is
        # never gone while its final status is not there, and the deletes cost no second round
        # of requests after the writes.
        units: list[list[Write]] = []
        for key, status in latest.items():
            key_row = self._row_key(partition, key)
            buckets.add(key_row[1])
            row = (partition, key_row[1], *schema.encode_status(status), ttl_s)
            unit: list[Write] = [(q["status_write"], row)]
            unit += [
                (q["attempt_write"], (*key_row, *encode_attempt(attempt, UNSET_VALUE), ttl_s))
                for attempt in status.attempt_log
            ]
            if status.state.is_final:
                unit.append((q["delete"], key_row))
            units.append(unit)
        # The status-bucket index row must outlive every status row under it; it is written
        # with some slack, so that it is rewritten at most once per slack period.
        ttl = min(_MAX_TTL_S, ttl_s + _STATUS_INDEX_SLACK_S)
        with self._lock:
            if len(self._status_indexed) > _CACHE_LIMIT:  # forget index rows that expired
                for entry in [e for e, expiry in self._status_indexed.items() if expiry < now_s]:
                    del self._status_indexed[entry]
            stale = [
                b for b in buckets if self._status_indexed.get((partition, b), 0) < now_s + ttl_s
            ]
        items: list[Item] = [(q["status_index"], (partition, b, ttl)) for b in stale]
        items += unit_batches(units)
        self._runner().many(items, f"record {len(units)} statuses of partition {partition}")
        with self._lock:
            self._status_indexed.update(((partition, b), now_s + ttl) for b in stale)

    def fetch_statuses(self, partition: int, keys: Iterable[TaskKey]) -> dict[TaskKey, TaskStatus]:
        """Status rows of `keys`: one multi-column IN per bucket (in chunks), run concurrently."""
        items: list[Item] = [
            (self._q["status_in"], (partition, bucket, cursors))
            for bucket, cursors in self._by_bucket(keys)
        ]
        found: dict[TaskKey, TaskStatus] = {}
        for rows in self._runner().many(items, "read statuses"):
            for row in rows:
                status = schema.decode_status(row)
                found[status.key] = status
        return found

    def delete_statuses(self, partition: int, keys: Collection[TaskKey]) -> None:
        rows = [self._row_key(partition, key) for key in set(keys)]
        deletes = [self._q[name] for name in ("status_delete", "attempts_delete")]
        items = statement_batches([(delete, row) for delete in deletes for row in rows])
        self._runner().many(items, f"delete {len(rows)} statuses of partition {partition}")

    def attempts(self, partition: int, key: TaskKey) -> list[Attempt]:
        rows = self._runner().one(
            self._q["attempts_read"], self._row_key(partition, key), "read attempts"
        )
        return sorted(map(decode_attempt, rows), key=lambda attempt: attempt.number)

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
        keep = None
        if states is not None:
            wanted = frozenset(states)
            if not wanted:
                return []
            keep = lambda view: view.state in wanted  # noqa: E731 - a filter, named once
        if from_ms is not None:
            after = max(after or admin.BEFORE_ALL, (from_ms, "", ""))  # no ordering id is empty
        # Through the index a query reads the id's rows only, tombstones included, so a whole
        # bucket is one query rather than a span of `read_slice_ms` each.
        indexed = ordering_id is not None and self.ordering_index
        # Without the index the node filters each span for the id: a span answers a few rows,
        # so a bucket's spans are read in one round, not in widening ones.
        filtered = ordering_id is not None and not indexed
        width, span = self.bucket_ms, self.read_slice_ms
        page = partial(admin.page, self._runner(), self._q, partition, width, limit=limit)
        page = partial(page, after=after, until_ms=until_ms)
        try:
            at_once = admin.FILTERED_AT_ONCE if filtered else 1
            spans = width if indexed else span
            return page(spans, ordering_id=ordering_id, keep=keep, at_once=at_once)
        except Exception as error:
            if ordering_id is None or _INDEX_BUILDING not in str(error):
                raise
        # Cassandra refuses reads through an index it is still building (over the rows of a
        # keyspace made before it): the partition's rows are read and the id's kept here.
        log.info(
            "the ordering_id index of keyspace %s is still being built; listing ordering id %r "
            "from every row of partition %d meanwhile",
            *(self.keyspace, ordering_id, partition),
        )
        # A name of its own: `keep` above closes over `wanted`, the states asked for.
        the_id, kept = ordering_id, keep
        return page(
            span, keep=lambda view: view.task.ordering_id == the_id and (kept is None or kept(view))
        )

    def count_due(self, partition: int, now_ms: int, *, after: ScheduleCursor | None = None) -> int:
        # One COUNT per span of `read_slice_ms` in each indexed bucket, concurrently.
        items: list[Item] = [
            (self._q["count_after"], (partition, bucket, *cursor, upper))
            for bucket, lower, below in self._reads(partition, after, now_ms, "count due tasks")
            for cursor, upper in schema.slices(lower, below, self.read_slice_ms)
        ]
        counts = self._runner().many(items, "count due tasks")
        return sum(int(rows[0][0]) for rows in counts if rows)

    def set_aside(self, records: Sequence[MalformedRecord]) -> None:
        block = schema.MALFORMED_BLOCK
        write = self._q["malformed_write"]
        items: list[Item] = [
            (write, (r.partition, r.offset // block, *r.columns(), self.ttl_s)) for r in records
        ]
        self._runner().many(items, f"set aside {len(items)} malformed records")

    def malformed_records(
        self, partition: int | None = None, *, from_offset: int = 0, limit: int = 100
    ) -> list[MalformedRecord]:
        run = self._runner()
        first = 0 if partition is None else from_offset
        first_block = first // schema.MALFORMED_BLOCK
        keys = [
            (p, b)
            for p, b in self._malformed_blocks(run)
            if partition is None or (p == partition and b >= first_block)
        ]
        found: list[MalformedRecord] = []
        for p, b in keys:
            rows = run.one(
                self._q["malformed_read"],
                (p, b, first, limit - len(found)),
                "read malformed records",
            )
            found += [MalformedRecord(p, *row) for row in rows]
            if len(found) >= limit:
                break
        return found

    def malformed_counts(self, limit: int) -> dict[int, int]:
        run = self._runner()
        counts: dict[int, int] = {}
        left = limit
        for p, b in self._malformed_blocks(run):
            if left <= 0:
                break
            offsets = run.one(self._q["malformed_offsets"], (p, b, left), "count malformed records")
            counts[p] = counts.get(p, 0) + len(offsets)
            left -= len(offsets)
        return {p: n for p, n in counts.items() if n}

    def _malformed_blocks(self, run: Runner) -> list[tuple[int, int]]:
        """The malformed table's partition keys, (partition, block), in order (malformed records
        are few: listing them is cheap, and needs no index table)."""
        rows = run.one(self._q["malformed_blocks"], None, "list malformed records")
        return sorted((p, b) for p, b in rows)

    def drop_malformed(self, partition: int, offsets: Collection[int]) -> None:
        block = schema.MALFORMED_BLOCK
        items: list[Item] = [
            (self._q["malformed_delete"], (partition, offset // block, offset))
            for offset in set(offsets)
        ]
        self._runner().many(items, f"drop {len(items)} malformed records")


class KeyspaceTenant:
    """A store with tables of its own in the keyspace of `tasks`, over its connection (open
    `tasks` first); subclasses give `what`, `ddl` and `statements`."""

    what = "store"
    """How errors name the store ("run store", "schedule store", ...)."""
    forget_deletes: tuple[str, ...] = ()
    """Tables given `gc_grace_seconds = 0` with the schema (`driver.forget_deletes_at_once`):
    only those whose every reader checks a row against the record it names."""

    def __init__(self, *, tasks: CassandraTaskStore) -> None:
        self.tasks = tasks
        self._q: dict[str, Any] = {}

    def ddl(self, ks: str) -> list[str]:
        """CREATE TABLE IF NOT EXISTS statements of the store's tables in keyspace `ks`."""
        raise NotImplementedError

    def statements(self, ks: str) -> dict[str, str]:
        """The store's queries by name, to be prepared on open."""
        raise NotImplementedError

    def tables_exist(self) -> bool:
        """Whether the keyspace has every table of the store (read from the schema, so that
        asking prepares nothing: the driver logs a prepare of a missing table as an ERROR)."""
        run, ks = self.tasks._runner(), self.tasks.keyspace
        rows = run.one(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
            (ks,),
            f"look for the {self.what}'s tables",
        )
        made = {str(row[0]) for row in rows}
        named = re.compile(rf"CREATE TABLE IF NOT EXISTS {re.escape(ks)}\.(\w+)")
        return all(match[1] in made for match in map(named.match, self.ddl(ks)) if match)

    def open(self, *, create_schema: bool = True) -> None:
        run, ks = self.tasks._runner(), self.tasks.keyspace
        if create_schema:
            driver.apply_schema(run, self.ddl(ks), timeout=60.0)
            if self.forget_deletes:
                driver.forget_deletes_at_once(run, ks, self.forget_deletes)
        self._q = driver.prepare(run, ks, self.statements(ks), expect_tables=create_schema)

    def close(self) -> None:
        self._q = {}  # the connection is the task store's to close

    def _runner(self) -> Runner:
        if not self._q:
            raise RuntimeError(f"the {self.what} is not open; call open()")
        return self.tasks._runner()

    def _one(self, name: str, params: Params, what: str) -> list[tuple[Any, ...]]:
        return self._runner().one(self._q[name], params, what)

    def _many(self, items: Sequence[tuple[str, Params]], what: str) -> list[list[tuple[Any, ...]]]:
        return self._runner().many([(self._q[name], params) for name, params in items], what)
