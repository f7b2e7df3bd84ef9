"""What the Cassandra task store promises beyond the port's contract suite.

Most tests need a real node (marker `cassandra`); the retry and unreachable-host tests need none.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler.bench.reload import tombstones_per_read, tombstones_read
from scheduler.errors import BackendUnavailableError, ConfigurationError
from scheduler.model import Attempt, AttemptOutcome, Task, TaskState, TaskStatus
from scheduler.stores._cassandra_session import (
    statement_batches,
    unit_batches,
)
from scheduler.stores._retry import RetryPolicy, call_with_retries
from scheduler.stores.abc import MalformedRecord
from scheduler.stores.cassandra import CassandraTaskStore
from tests.other_server import other_server
from tests.servers import cassandra_contact, kafka_bootstrap

FAST = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02)
HOUR_MS = 3_600_000


class Transient(Exception):
    pass


def make_store(**overrides: Any) -> CassandraTaskStore:
    hosts, port = cassandra_contact()
    settings: dict[str, Any] = {
        "hosts": hosts,
        "port": port,
        "keyspace": f"test_{uuid.uuid4().hex[:16]}",
        "bucket_ms": 60_000,
        "consistency": "ONE",
        "status_retention_s": 3600,
        # Without the ordering-id indexes unless a test asks: on Cassandra 5.0 "auto" would
        # make two SAI indexes per keyspace, seconds more to create and drop each
        # (docs/cassandra.md, "What the index costs").
        "ordering_index": False,
    }
    settings.update(overrides)
    return CassandraTaskStore(**settings)


def node_datacenter() -> str:
    """The datacenter the test node reports."""
    probe = make_store()
    try:
        rows = probe._runner(connect_if_needed=True).one(
            "SELECT data_center FROM system.local", None, "test"
        )
        return str(rows[0][0])
    finally:
        probe.close()


@pytest.fixture
def store() -> Iterator[CassandraTaskStore]:
    store = make_store()
    store.open(create_schema=True)
    yield store
    store.drop_keyspace()
    store.close()


def tasks_at(
    start: datetime, count: int, step: timedelta = timedelta(milliseconds=1)
) -> list[Task]:
    return [Task("oid", start + i * step, f"u{i:05d}", {"i": i}) for i in range(count)]


def indexed_buckets(store: CassandraTaskStore, partition: int) -> list[int]:
    rows = store._runner().one(
        f"SELECT bucket FROM {store.keyspace}.buckets WHERE partition = %s", (partition,), "test"
    )
    return [bucket for (bucket,) in rows]


# -- no server needed -------------------------------------------------------------------------


def test_transient_errors_are_retried_until_the_call_succeeds() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Transient
        return "done"

    result = call_with_retries(
        flaky, policy=FAST, transient=(Transient,), describe=str, sleep=lambda _: None
    )
    assert (result, len(calls)) == ("done", 3)


def test_exhausted_retries_raise_backend_unavailable_chained_to_the_last_error() -> None:
    def down() -> None:
        raise Transient("still down")

    with pytest.raises(BackendUnavailableError, match="gave up") as raised:
        call_with_retries(
            down, policy=FAST, transient=(Transient,), describe=lambda e: "gave up",
            sleep=lambda _: None,
        )  # fmt: skip
    assert isinstance(raised.value.__cause__, Transient)


def test_other_errors_are_not_retried() -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise KeyError("bug")

    with pytest.raises(KeyError):
        call_with_retries(broken, policy=FAST, transient=(Transient,), describe=str)
    assert len(calls) == 1


def test_backoff_delays_grow_exponentially_under_a_cap_with_jitter() -> None:
    policy = RetryPolicy(attempts=6, base_delay_s=0.1, max_delay_s=0.5)
    for _ in range(50):
        delays = list(policy.delays())
        assert len(delays) == 5
        assert all(0 <= d <= cap for d, cap in zip(delays, [0.1, 0.2, 0.4, 0.5, 0.5], strict=True))


@pytest.mark.parametrize(
    ("level", "says"),
    [
        ("ANY", "reads cannot use ANY"),
        ("LOCAL_SERIAL", "unknown Cassandra consistency level"),  # lightweight transactions only
        ("quorom", "use one of ALL, EACH_QUORUM"),
    ],
)
def test_a_consistency_level_the_store_cannot_use_is_refused_before_connecting(
    level: str, says: str
) -> None:
    """The store reads and writes at one level; a library caller bypasses the settings' check."""
    with pytest.raises(ConfigurationError, match=says):
        CassandraTaskStore(hosts=["127.0.0.1"], port=1, consistency=level)


@pytest.mark.parametrize(
    ("host", "port", "why"),
    [
        ("127.0.0.1", 1, "Connection refused"),  # nothing listens
        ("nosuchhost.invalid", 9042, "no host name resolves"),  # was a driver traceback
    ],
)
def test_an_unreachable_node_raises_backend_unavailable_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    host: str,
    port: int,
    why: str,
) -> None:
    monkeypatch.setattr(CassandraTaskStore, "retry_policy", FAST)
    store = CassandraTaskStore(
        hosts=[host], port=port, connect_timeout_s=0.5, request_timeout_s=0.5
    )
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as raised:
        store.open()
    message = str(raised.value)
    assert f"{host}:{port}" in message
    assert why in message
    assert "SCHEDULER_CASSANDRA_HOSTS" in message
    assert "SCHEDULER_CASSANDRA_PORT" in message  # a wrong port is as likely as a wrong host
    assert "scheduler services up" in message
    assert time.monotonic() - started < 10
    # The product's error says it all; the driver's per-attempt warnings would only bury it.
    driver_lines = [r for r in caplog.records if r.name.startswith("cassandra")]
    assert driver_lines == [], [r.getMessage()[:100] for r in driver_lines]
    # Quick refusals: the error alone, no line per try.
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_port_where_another_server_speaks_first_is_a_configuration_error_at_once() -> None:
    with other_server(greeting=b"SSH-2.0-OpenSSH_9.2\r\n") as port:
        store = CassandraTaskStore(hosts=["127.0.0.1"], port=port, connect_timeout_s=5)
        store.retry_policy = RetryPolicy(attempts=5)
        started = time.monotonic()
        with pytest.raises(ConfigurationError) as raised:
            store.open()
    assert time.monotonic() - started < 2  # not retried: the answer would be the same
    message = str(raised.value)
    assert f"127.0.0.1:{port} does not speak Cassandra's native protocol" in message
    assert "begins with byte 83 ('S')" in message
    assert "native_transport_port" in message


def test_a_port_that_takes_connections_but_never_answers_is_said_to_be_one() -> None:
    with other_server() as port:
        store = CassandraTaskStore(
            hosts=["127.0.0.1"], port=port, connect_timeout_s=0.5, request_timeout_s=0.5
        )
        store.retry_policy = FAST
        with pytest.raises(BackendUnavailableError) as raised:
            store.open()
    message = str(raised.value)
    assert f"127.0.0.1:{port}: Timed out creating connection (0.5 seconds);" in message
    assert "takes connections but never answered Cassandra's handshake" in message
    assert "last_host" not in message  # the driver's repr, not the words


def test_each_slow_try_to_connect_is_announced_before_the_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A try at a silent port lasts the connect timeout (10 s by default, 5 tries): the user
    waited most of a minute without a word before the error."""
    with other_server() as port:
        store = CassandraTaskStore(
            hosts=["127.0.0.1"], port=port, connect_timeout_s=1.2, request_timeout_s=1.2
        )
        store.retry_policy = FAST
        with pytest.raises(BackendUnavailableError):
            store.open()
    tries = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(tries) == FAST.attempts - 1, tries
    assert f"Cassandra at 127.0.0.1:{port} did not answer" in tries[0]
    assert "Timed out creating connection" in tries[0]
    assert tries[-1].endswith(f"trying again ({FAST.attempts - 1} of {FAST.attempts} tries made)")


@pytest.mark.kafka
def test_a_cassandra_address_that_is_kafkas_is_said_to_be_another_servers_port() -> None:
    host, _, port = kafka_bootstrap().split(",")[0].rpartition(":")
    store = CassandraTaskStore(
        hosts=[host], port=int(port), connect_timeout_s=0.5, request_timeout_s=0.5
    )
    store.retry_policy = FAST
    with pytest.raises(BackendUnavailableError) as raised:
        store.open()
    assert "takes connections but never answered Cassandra's handshake" in str(raised.value)
    assert "Kafka's 9092" in str(raised.value)


# -- against a real node ----------------------------------------------------------------------


@pytest.mark.cassandra
def test_status_rows_are_written_with_the_retention_as_ttl(store: CassandraTaskStore) -> None:
    (task,) = tasks_at(datetime.now(UTC), 1)
    store.write_tasks(0, [task])
    store.record_statuses(0, [TaskStatus(task.key, TaskState.RUNNING, attempts=1)])
    rows = store._runner().one(
        f"SELECT TTL(state), TTL(attempts) FROM {store.keyspace}.status",
        None,
        "test",
    )
    assert len(rows) == 1
    assert all(3500 < ttl <= 3600 for ttl in rows[0])


@pytest.mark.cassandra
def test_absent_status_fields_are_stored_without_null_tombstones(
    store: CassandraTaskStore,
) -> None:
    (task,) = tasks_at(datetime.now(UTC), 1)
    store.record_statuses(0, [TaskStatus(task.key, TaskState.RETRYING, 1, "boom", 123)])
    store.record_statuses(0, [TaskStatus(task.key, TaskState.RUNNING, 2)])
    assert store.fetch_statuses(0, [task.key])[task.key] == TaskStatus(
        task.key, TaskState.RUNNING, 2
    )
    bucket = task.scheduled_ms // store.bucket_ms
    assert tombstones_read(store, "status_in", (0, bucket, [task.key.cursor])) == 0


@pytest.mark.cassandra
def test_loading_after_a_cursor_reads_no_tombstones_of_completed_tasks(
    store: CassandraTaskStore,
) -> None:
    tasks = tasks_at(datetime.now(UTC).replace(second=0, microsecond=0), 200)
    store.write_tasks(0, tasks)
    store.record_statuses(0, [TaskStatus(t.key, TaskState.SUCCEEDED) for t in tasks[:150]])
    bucket = tasks[0].scheduled_ms // store.bucket_ms
    start, far = (bucket * store.bucket_ms, "", ""), 2**62
    assert tombstones_read(store, "load_after", (0, bucket, *start, far, 1000)) == 150
    cursor = tasks[149].key.cursor
    assert tombstones_read(store, "load_after", (0, bucket, *cursor, far, 1000)) == 0
    # `group status` counts due rows from a reload mark the same way.
    assert tombstones_read(store, "count_after", (0, bucket, *start, far)) == 150
    assert tombstones_read(store, "count_after", (0, bucket, *cursor, far)) == 0
    assert store.count_due(0, far, after=cursor) == 50
    loaded = store.load_tasks(0, cursor, far, 1000)
    assert [s.task for s in loaded] == tasks[150:]


@pytest.mark.cassandra
def test_reads_across_a_bucket_go_in_slices_so_no_query_scans_all_its_tombstones() -> None:
    """A new owner without a reload mark, `group status` and `tasks list` read a bucket from
    its start: each query spans `read_slice_ms`, so it scans the tombstones of one span only
    (Cassandra refuses a query past 100,000), and together they still find every live row."""
    store = make_store(read_slice_ms=10_000)  # six spans per one-minute bucket
    store.open(create_schema=True)
    try:
        minute = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)
        tasks = tasks_at(minute, 600, step=timedelta(milliseconds=100))  # 100 per span
        store.write_tasks(0, tasks)
        done, pending = tasks[:590], tasks[590:]
        store.record_statuses(0, [TaskStatus(t.key, TaskState.SUCCEEDED) for t in done])
        bucket, far = tasks[0].scheduled_ms // store.bucket_ms, 2**62
        whole = (0, bucket, tasks[0].scheduled_ms, "", "", far, 1000)
        assert tombstones_read(store, "load_after", whole) == 590  # one query: all of them

        loaded, load_reads = tombstones_per_read(store, lambda: store.load_tasks(0, None, far, 50))
        due, count_reads = tombstones_per_read(store, lambda: store.count_due(0, far))
        listed, list_reads = tombstones_per_read(
            store, lambda: store.list_tasks(0, states={TaskState.PENDING})
        )

        assert [row.task for row in loaded] == pending
        assert due == 10
        assert [view.task for view in listed] == pending
        for reads in (load_reads, count_reads, list_reads):
            assert sum(reads) >= 590  # every tombstone is still read once...
            assert max(reads) <= 100  # ...but no query reads more than one span's
    finally:
        store.drop_keyspace()
        store.close()


@pytest.mark.cassandra
def test_a_paged_listing_reads_a_bucket_a_few_spans_at_a_time_and_misses_nothing() -> None:
    """Bulk changes page through `list_tasks`; a page reads the spans it needs, a round of
    `SPANS_AT_ONCE` at a time, from the cursor's span on, never a whole bucket at once."""
    from scheduler.stores._cassandra_admin import SPANS_AT_ONCE

    store = make_store(read_slice_ms=1_000)  # sixty spans per one-minute bucket
    store.open(create_schema=True)
    try:
        minute = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)
        tasks = tasks_at(minute, 110, step=timedelta(milliseconds=1_100))  # two buckets
        store.write_tasks(0, tasks)
        store.record_statuses(0, [TaskStatus(t.key, TaskState.FAILED, data={}) for t in tasks[::3]])
        assert 2 * SPANS_AT_ONCE < 60
        found, after = [], None
        while True:
            page = store.list_tasks(0, limit=7, after=after)
            found += [view.task.key for view in page]
            if len(page) < 7:
                break
            after = page[-1].task.key.cursor
        assert found == [task.key for task in tasks]
        window = store.list_tasks(
            0, from_ms=tasks[20].scheduled_ms, until_ms=tasks[90].scheduled_ms, limit=1000
        )
        assert [view.task.key for view in window] == [task.key for task in tasks[20:90]]
        # Filtered walks cross the same spans: by ordering id (filtered in the node), and by
        # state (filtered after the join, the LIMIT growing while rows are refused).
        others = [Task("other", t.scheduled_time, "x", {}) for t in tasks[5::10]]
        store.write_tasks(0, others)
        for filters, expected in [
            ({"ordering_id": "other"}, [t.key for t in others]),
            ({"ordering_id": "oid", "states": [TaskState.FAILED]}, [t.key for t in tasks[::3]]),
            ({"states": [TaskState.FAILED]}, [t.key for t in tasks[::3]]),
        ]:
            found, after = [], None
            while page := store.list_tasks(0, limit=4, after=after, **filters):  # type: ignore[arg-type]
                found += [view.task.key for view in page]
                after = page[-1].task.key.cursor
            assert found == expected, filters
    finally:
        store.drop_keyspace()
        store.close()


def test_a_read_slice_must_be_positive() -> None:
    # Refused as the store is made, before it connects: no node needed.
    with pytest.raises(ConfigurationError, match="read_slice_ms must be positive"):
        CassandraTaskStore(hosts=["127.0.0.1"], read_slice_ms=0)


@pytest.mark.cassandra
def test_old_empty_buckets_leave_the_index_when_a_load_passes_through(
    store: CassandraTaskStore,
) -> None:
    old = datetime.now(UTC) - timedelta(hours=3)
    done = tasks_at(old, 3, step=timedelta(minutes=5))  # three one-minute buckets
    kept = tasks_at(old + timedelta(minutes=30), 1)
    recent = tasks_at(datetime.now(UTC) - timedelta(minutes=2), 1)
    store.write_tasks(0, done + kept + recent)
    store.record_statuses(0, [TaskStatus(t.key, TaskState.SUCCEEDED) for t in done])
    assert len(indexed_buckets(store, 0)) == 5

    loaded = store.load_tasks(0, None, time.time_ns() // 1_000_000, 100)

    assert [s.task for s in loaded] == kept + recent
    assert indexed_buckets(store, 0) == [t.scheduled_ms // store.bucket_ms for t in kept + recent]


@pytest.mark.cassandra
def test_a_task_written_into_a_pruned_bucket_is_loaded(store: CassandraTaskStore) -> None:
    old = datetime.now(UTC) - timedelta(hours=3)
    first, second = tasks_at(old, 2)
    store.write_tasks(0, [first])
    store.record_statuses(0, [TaskStatus(first.key, TaskState.FAILED, data=first.data)])
    store.load_tasks(0, None, time.time_ns() // 1_000_000, 10)
    assert indexed_buckets(store, 0) == []

    store.write_tasks(0, [second])  # e.g. an operator retrying an old failed task

    assert [s.task for s in store.load_tasks(0, None, time.time_ns() // 1_000_000, 10)] == [second]


@pytest.mark.cassandra
def test_failed_tasks_stay_listed_after_their_bucket_is_pruned(store: CassandraTaskStore) -> None:
    (task,) = tasks_at(datetime.now(UTC) - timedelta(hours=3), 1)
    store.write_tasks(0, [task])
    store.record_statuses(0, [TaskStatus(task.key, TaskState.FAILED, 3, "boom", data=task.data)])
    store.load_tasks(0, None, time.time_ns() // 1_000_000, 10)
    assert indexed_buckets(store, 0) == []

    (view,) = store.list_tasks(0, states={TaskState.FAILED})

    assert view.task == task
    assert view.status is not None and view.status.last_error == "boom"


@pytest.mark.cassandra
def test_a_keyspace_dropped_and_recreated_under_a_running_store_indexes_new_rows(
    store: CassandraTaskStore,
) -> None:
    """An operator drops the keyspace while a worker runs, then runs `scheduler schema apply`:
    the store says what happened, and the rows it writes afterwards are found by loads (the
    store's cache of index rows written must not outlive the rows)."""
    soon = datetime.now(UTC) + timedelta(minutes=5)
    before, after = tasks_at(soon, 2)
    store.claim_meta("partition_count", "4")  # as a worker's start does
    store.write_tasks(0, [before])
    operator = make_store(keyspace=store.keyspace)
    operator.drop_keyspace()

    with pytest.raises(ConfigurationError) as raised:
        store.load_tasks(0, None, time.time_ns() // 1_000_000 + HOUR_MS, 10)
    message = str(raised.value)
    assert f"keyspace {store.keyspace} does not exist" in message
    assert "dropped while it ran" in message and "scheduler schema apply" in message

    operator.apply_schema()
    operator.close()
    store.write_tasks(0, [after])  # the same bucket as `before`

    assert indexed_buckets(store, 0) == [after.key.scheduled_ms // store.bucket_ms]
    loaded = store.load_tasks(0, None, time.time_ns() // 1_000_000 + HOUR_MS, 10)
    assert [stored.task for stored in loaded] == [after]
    # Pinned again by the first write: a worker started later must not take the keyspace, in
    # use ever since, for a new one (and refuse it, see runtime.new_store_check).
    assert store.read_meta("partition_count") == "4"


@pytest.mark.cassandra
def test_a_local_datacenter_the_cluster_does_not_have_is_named_with_the_ones_it_has() -> None:
    """The DC-aware policy ignores every node of another datacenter, and the driver then says
    only "Unable to connect to any servers" with the contact points' addresses: the product
    died on that with an AttributeError, and would otherwise have reported the node as down."""
    actual = node_datacenter()
    store = make_store(local_dc="no-such-dc")
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as refused:
        store.open()
    message = str(refused.value)
    assert "SCHEDULER_CASSANDRA_LOCAL_DC='no-such-dc' is no datacenter" in message
    assert f"whose nodes are in {actual};" in message
    assert time.monotonic() - started < 10  # refused at once, not after the connect retries


@pytest.mark.cassandra
def test_a_replication_the_nodes_refuse_names_the_settings_and_their_datacenters() -> None:
    """A datacenter the cluster does not have: Cassandra refuses the keyspace, and `schema
    apply` printed the driver's traceback."""
    actual = node_datacenter()
    store = make_store(replication={"class": "NetworkTopologyStrategy", "dc_nowhere": 1})
    try:
        with pytest.raises(ConfigurationError) as refused:
            store.apply_schema()
    finally:
        store.close()
    message = str(refused.value)
    assert "Unrecognized strategy option {dc_nowhere}" in message
    assert "SCHEDULER_CASSANDRA_DATACENTERS" in message
    assert message.endswith(f"this cluster's datacenters: {actual}")


@pytest.mark.cassandra
def test_too_few_replicas_for_the_consistency_level_says_how_many_and_what_to_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replication factor 3 on one node: Cassandra creates the keyspace with only a warning,
    then refuses every LOCAL_QUORUM request as Unavailable. The error said to check that the
    nodes are up, which they were."""
    monkeypatch.setattr(CassandraTaskStore, "retry_policy", FAST)
    replication = {"class": "SimpleStrategy", "replication_factor": 3}
    store = make_store(replication=replication, consistency="LOCAL_QUORUM")
    try:
        shown = store.apply_schema()
        assert shown == "{'class': 'SimpleStrategy', 'replication_factor': '3'}"
        with pytest.raises(BackendUnavailableError) as failed:
            store.claim_meta("partitions", "8")
        message = str(failed.value)
        assert "Cannot achieve consistency level LOCAL_QUORUM" in message
        assert "LOCAL_QUORUM needs 2 replicas of the data alive, and the coordinator counts 1" in (
            message
        )
        assert "SCHEDULER_CASSANDRA_CONSISTENCY" in message
        # `schema apply` shows the keyspace's replication, not the configured one, when the
        # keyspace was there first.
        again = make_store(keyspace=store.keyspace, consistency="ONE")
        try:
            assert again.apply_schema() == shown
        finally:
            again.close()
    finally:
        store.drop_keyspace()
        store.close()


@pytest.mark.cassandra
def test_a_network_topology_keyspace_gets_the_per_dc_factors() -> None:
    local_dc = node_datacenter()
    replication = {"class": "NetworkTopologyStrategy", local_dc: 1}
    store = make_store(replication=replication, local_dc=local_dc, consistency="LOCAL_QUORUM")
    store.open(create_schema=True)
    try:
        store.apply_schema()  # idempotent
        (row,) = store._runner().one(
            "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
            (store.keyspace,),
            "test",
        )
        assert row[0]["class"].endswith("NetworkTopologyStrategy")
        assert row[0][local_dc] == "1"
        (task,) = tasks_at(datetime.now(UTC), 1)
        store.write_tasks(0, [task])
        assert [s.task for s in store.load_tasks(0, None, 2**62, 10)] == [task]
        assert store.claim_meta("partitions", "8") == "8"
        assert store.claim_meta("partitions", "16") == "8"
    finally:
        store.drop_keyspace()
        store.close()


@pytest.mark.cassandra
def test_statuses_join_correctly_among_many_retained_statuses_of_completed_tasks(
    store: CassandraTaskStore,
) -> None:
    tasks = tasks_at(datetime.now(UTC).replace(second=0, microsecond=0), 300)
    store.write_tasks(0, tasks)
    pending = tasks[::10]
    done = [t for t in tasks if t not in pending]
    store.record_statuses(0, [TaskStatus(t.key, TaskState.SUCCEEDED) for t in done])
    retrying = {t.key: TaskStatus(t.key, TaskState.RETRYING, 1, "boom", 5) for t in pending[-3:]}
    store.record_statuses(0, list(retrying.values()))

    loaded = store.load_tasks(0, None, 2**62, 1000)

    assert [s.task for s in loaded] == pending
    assert {s.task.key: s.status for s in loaded if s.status} == retrying


@pytest.mark.cassandra
def test_the_last_of_duplicate_keys_in_one_write_wins(store: CassandraTaskStore) -> None:
    now = datetime.now(UTC)
    versions = [Task("oid", now, "same", {"version": v}) for v in range(50)]
    store.write_tasks(0, versions)
    (loaded,) = store.load_tasks(0, None, 2**62, 10)
    assert loaded.task.data == {"version": 49}


@pytest.mark.cassandra
def test_opening_without_schema_says_how_to_create_it() -> None:
    store = make_store()
    try:
        with pytest.raises(ConfigurationError, match="scheduler schema apply"):
            store.open(create_schema=False)
    finally:
        store.close()


@pytest.mark.cassandra
def test_a_keyspace_made_before_the_malformed_table_is_refused_until_schema_apply_adds_it(
    store: CassandraTaskStore,
) -> None:
    """The upgrade: a worker started with create_schema=false on an earlier version's keyspace
    says what to run, and `scheduler schema apply` (apply_schema) adds the table to it."""
    store.write_tasks(0, tasks_at(datetime.now(UTC), 3))
    store._runner().result(f"DROP TABLE {store.keyspace}.malformed", None, "test", timeout=60)
    older = make_store(keyspace=store.keyspace)
    try:
        with pytest.raises(ConfigurationError, match="scheduler schema apply") as refused:
            older.open(create_schema=False)
        assert "malformed" in str(refused.value)
        older.apply_schema()
        older.set_aside(
            [MalformedRecord.of(0, 1, reason="r", key=None, value=b"x", timestamp_ms=1, seen_ms=2)]
        )
        assert [r.offset for r in older.malformed_records()] == [1]
        assert len(older.load_tasks(0, None, 2**62, 10)) == 3  # the earlier rows are untouched
    finally:
        older.close()


def test_writes_are_batched_per_cassandra_partition_and_a_lone_row_is_not() -> None:
    from cassandra.query import BatchStatement

    statement = "INSERT INTO t (partition, bucket, n, data) VALUES (%s, %s, %s, %s)"
    rows = [(0, b, i, "x" * 10) for b in (1, 2) for i in range(120)] + [(0, 3, 0, "y" * 9000)]

    items = statement_batches([(statement, row) for row in rows])  # type: ignore[arg-type]

    assert [len(s) for s, _ in items[:-1]] == [50, 50, 20] * 2
    assert all(isinstance(s, BatchStatement) for s, _ in items[:-1])
    assert items[-1] == (statement, (0, 3, 0, "y" * 9000))


def test_a_status_row_and_its_attempt_row_of_one_partition_key_share_one_batch() -> None:
    from cassandra.query import BatchStatement

    status = "INSERT INTO status (partition, bucket, n) VALUES (%s, %s, %s)"
    attempt = "INSERT INTO task_attempts (partition, bucket, n, a) VALUES (%s, %s, %s, %s)"
    writes = [(status, (0, 1, n)) for n in range(3)] + [(attempt, (0, 1, n, 1)) for n in range(3)]
    writes += [(status, (0, 2, 0)), (attempt, (0, 2, 0, 1)), (status, (1, 1, 0))]

    items = statement_batches(writes)  # type: ignore[arg-type]

    assert len(items) == 3  # (0, 1): one batch of six; (0, 2): one batch of two; (1, 1) alone
    first, second, lone = items
    assert isinstance(first[0], BatchStatement) and len(first[0]) == 6
    assert isinstance(second[0], BatchStatement) and len(second[0]) == 2
    assert lone == (status, (1, 1, 0))


def test_a_tasks_status_attempt_and_schedule_delete_are_never_split_between_batches() -> None:
    from cassandra.query import BatchStatement

    status = "INSERT INTO status (partition, bucket, n, data) VALUES (%s, %s, %s, %s)"
    attempt = "INSERT INTO task_attempts (partition, bucket, n, a) VALUES (%s, %s, %s, %s)"
    delete = "DELETE FROM schedule WHERE partition = %s AND bucket = %s AND n = %s"
    units = [
        [(status, (0, 1, n, "x" * 200)), (attempt, (0, 1, n, 1)), (delete, (0, 1, n))]
        for n in range(40)
    ]

    items = unit_batches(units)  # type: ignore[arg-type]

    batches = [statement for statement, _ in items]
    assert all(isinstance(batch, BatchStatement) for batch in batches)
    assert sum(len(batch) for batch in batches) == 120
    assert len(batches) > 1  # 40 tasks of ~230 bytes do not fit one batch of 3,000
    assert all(len(batch) % 3 == 0 for batch in batches)  # whole tasks only


@pytest.mark.cassandra
def test_attempt_records_have_the_retention_as_ttl_and_merge_without_tombstones(
    store: CassandraTaskStore,
) -> None:
    (task,) = tasks_at(datetime.now(UTC), 1)
    began = Attempt(1, 100, worker="w1")
    ended = Attempt(1, ended_ms=250, outcome=AttemptOutcome.FAILED, exit_code=2, error="x")
    store.record_statuses(0, [TaskStatus(task.key, TaskState.RUNNING, 1, attempt_log=(began,))])
    store.record_statuses(
        0, [TaskStatus(task.key, TaskState.RETRYING, 1, "x", 300, attempt_log=(ended,))]
    )

    assert store.attempts(0, task.key) == [
        Attempt(1, 100, 250, AttemptOutcome.FAILED, 2, "x", "w1")
    ]
    rows = store._runner().one(
        f"SELECT TTL(started_ms), TTL(outcome) FROM {store.keyspace}.task_attempts", None, "test"
    )
    assert all(3500 < ttl <= 3600 for ttl in rows[0])
    bucket = task.scheduled_ms // store.bucket_ms
    assert tombstones_read(store, "attempts_read", (0, bucket, *task.key.cursor)) == 0


@pytest.mark.cassandra
def test_schema_apply_adds_the_attempts_table_to_a_keyspace_made_before_it(
    store: CassandraTaskStore,
) -> None:
    (task,) = tasks_at(datetime.now(UTC), 1)
    store.write_tasks(0, [task])
    store.record_statuses(0, [TaskStatus(task.key, TaskState.RETRYING, 1, "boom", 123)])
    run = store._runner()
    run.result(f"DROP TABLE {store.keyspace}.task_attempts", None, "test", timeout=60)
    store.close()

    upgraded = make_store(keyspace=store.keyspace)
    upgraded.apply_schema()  # what `scheduler schema apply` and a starting worker run
    try:
        assert [row.task for row in upgraded.load_tasks(0, None, 2**62, 10)] == [task]
        assert upgraded.fetch_statuses(0, [task.key])[task.key].last_error == "boom"
        upgraded.record_statuses(
            0, [TaskStatus(task.key, TaskState.RUNNING, 2, attempt_log=(Attempt(2, 5),))]
        )
        assert upgraded.attempts(0, task.key) == [Attempt(2, 5)]
    finally:
        upgraded.close()  # the fixture connects again to drop the keyspace


class _RecordingRunner:
    """Stands in for the session's runner: answers the bucket index reads with one bucket and
    every scan with no rows, and keeps the scans' bound values and each round's size."""

    def __init__(self, bucket: int) -> None:
        self.bucket = bucket
        self.scans: list[tuple[str, tuple[Any, ...]]] = []
        self.rounds: list[int] = []

    def many(self, items: list[tuple[Any, Any]], what: str) -> list[list[Any]]:
        self.rounds.append(len(items))
        answers: list[list[Any]] = []
        for statement, params in items:
            if statement == "buckets":
                answers.append([(self.bucket,)])
            elif statement == "status_buckets":
                answers.append([])
            else:
                self.scans.append((statement, tuple(params)))
                answers.append([])
        return answers


def test_a_listing_resumes_inside_the_cursors_bucket_right_after_its_row() -> None:
    # No node needed: the scans' bounds are what is checked.
    from scheduler.stores import _cassandra_admin as admin

    bucket_ms, slice_ms = 60_000, 10_000
    cursor = (7 * bucket_ms + 25_000, "orders-3", "u17")
    run = _RecordingRunner(bucket=7)
    q = {name: name for name in ("buckets", "status_buckets", "load_after", "status_scan")}
    views = admin.page(run, q, 2, bucket_ms, slice_ms, limit=101, after=cursor)  # type: ignore[arg-type]
    assert views == []
    first_span = 7 * bucket_ms + 30_000  # the cursor's span ends at the next slice boundary
    # Each scan is limited to the rows the page still wants.
    assert run.scans[:2] == [
        ("load_after", (2, 7, *cursor, first_span, 101)),
        ("status_scan", (2, 7, *cursor, first_span, 101)),
    ]
    # The bucket's earlier spans are not read; the later ones from their own start.
    assert [params[2:6] for _, params in run.scans[2::2]] == [
        (first_span + n * slice_ms, "", "", first_span + (n + 1) * slice_ms) for n in range(3)
    ]
    assert first_span + 3 * slice_ms == 8 * bucket_ms
    # The two bucket indexes in one round; then empty spans widen the rounds: 1, 2, then the
    # one span left (two queries a span).
    assert run.rounds == [2, 2, 4, 2]


def test_a_listing_of_one_ordering_id_reads_the_rest_of_the_cursors_millisecond_by_key() -> None:
    # Cassandra refuses an equality on ordering_id beside a tuple bound on the clustering key,
    # so the cursor's millisecond is read by key and the later ones filtered.
    from scheduler.stores import _cassandra_admin as admin

    bucket_ms = slice_ms = 60_000
    cursor = (7 * bucket_ms + 25_000, "orders-3", "u17")
    names = ("buckets", "status_buckets", "scan_at", "scan_of", "status_scan_at", "status_scan_of")
    q = {name: name for name in names}
    end = 8 * bucket_ms
    for ordering_id, expected in [
        ("orders-3", [("scan_at", (2, 7, cursor[0], "orders-3", "u17", 10))]),
        ("orders-4", [("scan_at", (2, 7, cursor[0], "orders-4", "", 10))]),
        ("orders-2", []),  # sorts before the cursor's id: nothing more in its millisecond
    ]:
        run = _RecordingRunner(bucket=7)
        views = admin.page(  # type: ignore[arg-type]
            run, q, 2, bucket_ms, slice_ms, limit=10, after=cursor, ordering_id=ordering_id
        )
        assert views == []
        later = ("scan_of", (2, 7, cursor[0] + 1, end, ordering_id, 10))
        assert [scan for scan in run.scans if scan[0].startswith("scan")] == [*expected, later]


def test_an_ordering_id_filtered_in_the_node_reads_a_bucket_of_spans_in_one_round() -> None:
    # No node needed: each span answers a few of the id's rows, so its spans go at once.
    from scheduler.stores import _cassandra_admin as admin

    bucket_ms, slice_ms = 60_000, 1_000  # sixty spans in the bucket
    names = ("buckets", "status_buckets", "scan_of", "status_scan_of")
    q = {name: name for name in names}
    run = _RecordingRunner(bucket=7)
    views = admin.page(  # type: ignore[arg-type]
        run, q, 2, bucket_ms, slice_ms, limit=101, ordering_id="orders-3", at_once=64
    )
    assert views == []
    assert run.rounds == [2, 120]  # the bucket indexes; then every span, two queries each
    spans = [params[2:4] for statement, params in run.scans if statement == "scan_of"]
    assert spans == [
        (7 * bucket_ms + n * slice_ms, 7 * bucket_ms + (n + 1) * slice_ms) for n in range(60)
    ]
    # Unfiltered, the same bucket is read in widening rounds (1, 2, 4, 8, 16 spans, ...).
    run = _RecordingRunner(bucket=7)
    admin.page(
        run,
        q | {"load_after": "load_after", "status_scan": "status_scan"},
        2,
        bucket_ms,
        slice_ms,
        limit=101,
    )  # type: ignore[arg-type]
    assert run.rounds[:6] == [2, 2, 4, 8, 16, 32]


def test_the_schema_indexes_ordering_ids_only_when_asked() -> None:
    from scheduler.stores import cassandra_schema as schema

    plain = schema.table_ddl("ks", 3600)
    indexed = schema.table_ddl("ks", 3600, ordering_index=True)
    assert not any("INDEX" in ddl for ddl in plain)
    assert indexed[: len(plain)] == plain
    assert indexed[len(plain) :] == [
        "CREATE CUSTOM INDEX IF NOT EXISTS schedule_ordering_id ON ks.schedule (ordering_id)"
        " USING 'StorageAttachedIndex'",
        "CREATE CUSTOM INDEX IF NOT EXISTS status_ordering_id ON ks.status (ordering_id)"
        " USING 'StorageAttachedIndex'",
    ]


def _indexes(store: CassandraTaskStore) -> set[tuple[str, str]]:
    rows = store._runner(connect_if_needed=True).one(
        "SELECT table_name, index_name FROM system_schema.indexes WHERE keyspace_name = %s",
        (store.keyspace,),
        "test",
    )
    return {(table, name) for table, name in rows}


def _pages_of(store: CassandraTaskStore, ordering_id: str) -> list[list[tuple[Any, ...]]]:
    pages, after = [], None
    while True:
        page = store.list_tasks(0, ordering_id=ordering_id, limit=2, after=after)
        pages.append([(*v.task.key.cursor, v.state.value) for v in page])
        if len(page) < 2:
            return pages
        after = page[-1].task.key.cursor


@pytest.mark.cassandra
def test_a_keyspace_made_without_the_ordering_index_gets_it_on_open_and_lists_the_same_pages() -> (
    None
):
    start = datetime.now(UTC).replace(second=0, microsecond=0)
    # Three ids in one millisecond (a cursor inside it), others spread over three one-second
    # spans of two buckets, and a finished task whose schedule row is gone (a status only).
    tasks = [Task(oid, start, f"u{n}", {}) for n in range(3) for oid in ("a", "b", "c")]
    tasks += [Task("ab"[n % 2], start + timedelta(seconds=n * 25), f"v{n}", {}) for n in range(7)]
    plain = make_store(ordering_index=False, read_slice_ms=1_000)
    plain.open(create_schema=True)
    try:
        plain.write_tasks(0, tasks)
        done = tasks[-1]
        plain.record_statuses(0, [TaskStatus(done.key, TaskState.SUCCEEDED, 1)])
        assert _indexes(plain) == set()
        before = {oid: _pages_of(plain, oid) for oid in ("a", "b", "nobody")}
        assert sum(len(page) for page in before["a"]) == 3 + 4
        assert before["nobody"] == [[]]

        indexed = make_store(keyspace=plain.keyspace, read_slice_ms=1_000, ordering_index=True)
        indexed.open(create_schema=True)  # what a starting worker or API runs
        try:
            assert _indexes(indexed) == {
                ("schedule", "schedule_ordering_id"),
                ("status", "status_ordering_id"),
            }
            deadline = time.monotonic() + 60  # the index over existing rows builds in the node
            while {oid: _pages_of(indexed, oid) for oid in before} != before:
                assert time.monotonic() < deadline, "the indexed listing never matched"
                time.sleep(0.5)
        finally:
            indexed.close()
    finally:
        plain.drop_keyspace()
        plain.close()


def _auto_reader_uses_index(keyspace: str) -> bool:
    """Whether a store opening this keyspace with the setting "auto" lists through the
    ordering-id index."""
    reader = make_store(keyspace=keyspace, ordering_index="auto")
    reader.open(create_schema=False)
    try:
        return bool(reader.ordering_index)
    finally:
        reader.close()


@pytest.mark.cassandra
def test_by_default_the_ordering_indexes_are_made_on_a_node_with_sai_and_listed_through() -> None:
    """ "auto": the test node runs Cassandra 5.0, so the schema gets the indexes; a store that
    opens the keyspace without making the schema (an API beside the workers) finds them there,
    and one opening a keyspace made without them lists span by span, as before."""
    made = make_store(ordering_index="auto")
    made.open(create_schema=True)
    try:
        assert made.ordering_index_setting == "auto" and made.ordering_index is True
        assert {name for _, name in _indexes(made)} == {
            "schedule_ordering_id",
            "status_ordering_id",
        }
        assert _auto_reader_uses_index(made.keyspace) is True
    finally:
        made.drop_keyspace()
        made.close()
    plain = make_store(ordering_index=False)
    plain.open(create_schema=True)
    try:
        assert _auto_reader_uses_index(plain.keyspace) is False
    finally:
        plain.drop_keyspace()
        plain.close()


def test_the_node_version_decides_auto_and_an_unreadable_one_counts_as_too_old() -> None:
    from scheduler.stores import _cassandra_session as driver

    class Node:
        def __init__(self, version: object) -> None:
            self.version = version

        def one(self, statement: Any, params: Any, what: str) -> list[tuple[Any, ...]]:
            return [(self.version,)]

    assert driver.release_major(Node("5.0.9")) == 5  # type: ignore[arg-type]
    assert driver.release_major(Node("4.1.5")) == 4  # type: ignore[arg-type]
    assert driver.release_major(Node(None)) == 0  # type: ignore[arg-type]
    assert driver.release_major(Node("dse")) == 0  # type: ignore[arg-type]


@pytest.mark.cassandra
def test_while_the_index_builds_an_ordering_id_listing_keeps_its_state_filter(
    store: CassandraTaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback read (every row of the partition, the id's kept here) applies the states
    asked for too: a SUCCEEDED task of the id is left out of a PENDING listing."""
    from scheduler.stores import _cassandra_admin as admin

    start = datetime.now(UTC).replace(microsecond=0)
    tasks = [Task(oid, start + timedelta(seconds=n), f"u{n}", {}) for n in range(3) for oid in "ab"]
    store.write_tasks(0, tasks)
    store.record_statuses(0, [TaskStatus(tasks[0].key, TaskState.SUCCEEDED, 1)])
    real, refused = admin.page, []

    def building(*args: Any, **kwargs: Any) -> list[Any]:
        if kwargs.get("ordering_id") is not None:
            refused.append(kwargs["ordering_id"])
            raise RuntimeError("Error from server: code=2200 INDEX_NOT_AVAILABLE")
        return real(*args, **kwargs)

    monkeypatch.setattr(admin, "page", building)
    store.ordering_index = True
    listed = store.list_tasks(0, ordering_id="a", states=[TaskState.PENDING])
    assert refused == ["a"]
    assert [view.task.key for view in listed] == [t.key for t in tasks[2::2]]
