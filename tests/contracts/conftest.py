"""Fixtures that build every adapter of a port, so one contract suite runs against all of them.

The real backends sit behind the `kafka` and `cassandra` markers; each test gets a fresh topic,
and a Cassandra keyspace emptied for it, so that tests never see each other's rows or records.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from scheduler.logs.abc import LogProducer, TaskLog
from scheduler.stores.abc import TaskStore

BUCKET_MS = 60_000
"""Small buckets, so that contract tests cross bucket boundaries with nearby times."""
STATUS_RETENTION_S = 3600.0
SHORT_RETENTION_S = 2.0
"""Status retention of the `short_retention_task_store` (Cassandra TTLs are whole seconds)."""
LOG_PARTITIONS = 4

STORES = [
    "sqlite",
    pytest.param("cassandra", marks=pytest.mark.cassandra),
    # The same contract over mutual TLS, logged in as a role that is not a superuser.
    pytest.param("cassandra-secured", marks=pytest.mark.cassandra),
]
LOGS = [
    "embedded",
    pytest.param("kafka", marks=pytest.mark.kafka),
    # The same contract with the producer's send in Python (SCHEDULER_SPEEDUPS=0): where the C
    # path is built it serves every other Kafka log here.
    pytest.param("kafka-python", marks=pytest.mark.kafka),
    # The same contract with the group on KIP-848's `consumer` protocol (Kafka 4): the broker
    # assigns partitions and the consumer is told incrementally, as with cooperative-sticky.
    pytest.param("kafka-kip848", marks=pytest.mark.kafka),
    # The same contract over TLS and a SCRAM login, as a user the ACLs allow only what
    # docs/kafka.md lists (on topics and groups named contract-*).
    pytest.param("kafka-secured", marks=pytest.mark.kafka),
]


_TASK_KEYSPACES: dict[tuple[str, float], str] = {}
"""The task store keyspace per node (`cassandra`, `cassandra-secured`) and status retention (its
tables' compaction window), made by the first test that asks and emptied for each later one:
creating a keyspace's tables and dropping them took most of each test's time (seconds on an idle
node, 20-60 s on a loaded one; truncating the tables a tenth of that). On the secured node the
tests' role made the keyspace, so it owns it and may truncate its tables."""


def _task_keyspace(store: Any, shared: tuple[str, float]) -> None:
    """Open `store` on the shared keyspace of its node and retention: created (with its tables)
    the first time, else every table emptied, so each test still starts from an empty store."""
    if _TASK_KEYSPACES.get(shared) == store.keyspace:
        store.open(create_schema=False)
        session = store._cluster.connect()
        try:
            for (table,) in session.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
                [store.keyspace],
            ):
                session.execute(f"TRUNCATE {store.keyspace}.{table}", timeout=120)
        finally:
            session.shutdown()
    else:
        store.open(create_schema=True)
        _TASK_KEYSPACES[shared] = store.keyspace


@pytest.fixture(scope="session", autouse=True)
def _drop_shared_keyspaces() -> Iterator[None]:
    yield
    if not _TASK_KEYSPACES:
        return
    from scheduler.stores.cassandra import CassandraTaskStore
    from tests.servers import _cassandra_contact, _secured_cassandra, secured_cassandra_role

    # The nodes a marked test reached; not `cassandra_contact` or `secured_cassandra`, whose
    # marker checks would blame the session's last test, during whose teardown this runs. The
    # role is the one that made the keyspace (cached, like the nodes).
    for (kind, _), keyspace in _TASK_KEYSPACES.items():
        if kind == "cassandra":
            hosts, port = _cassandra_contact()
            options: dict[str, Any] = {}
        else:
            node = _secured_cassandra()
            hosts, port = node.hosts, node.port
            options = {"credentials": secured_cassandra_role(), "tls": node.tls_options()}
        dropper = CassandraTaskStore(hosts=hosts, port=port, keyspace=keyspace, **options)
        try:
            dropper.drop_keyspace()
        finally:
            dropper.close()
    _TASK_KEYSPACES.clear()


@contextmanager
def _make_store(kind: str, tmp_path: Path, status_retention_s: float) -> Iterator[TaskStore]:
    store: TaskStore
    if kind == "sqlite":
        from scheduler.stores.sqlite import SqliteTaskStore

        store = SqliteTaskStore(
            path=str(tmp_path / "store.db"),
            bucket_ms=BUCKET_MS,
            status_retention_s=status_retention_s,
        )
        store.open(create_schema=True)
        try:
            yield store
        finally:
            store.close()
    elif kind in ("cassandra", "cassandra-secured"):
        from scheduler.stores.cassandra import CassandraTaskStore
        from tests.servers import cassandra_contact, secured_cassandra, secured_cassandra_role

        options: dict[str, Any] = {}
        if kind == "cassandra":
            hosts, port = cassandra_contact()
        else:
            node = secured_cassandra()
            hosts, port = node.hosts, node.port
            options = {"credentials": secured_cassandra_role(), "tls": node.tls_options()}
        # The plain node's stores list ordering ids through the index (off by default), the
        # secured node's without it: the contract holds both ways.
        options["ordering_index"] = kind == "cassandra"
        shared = (kind, status_retention_s)
        cassandra = CassandraTaskStore(
            hosts=hosts,
            port=port,
            **options,
            keyspace=_TASK_KEYSPACES.get(shared, f"contract_{uuid4().hex[:12]}"),
            bucket_ms=BUCKET_MS,
            replication={"class": "SimpleStrategy", "replication_factor": 1},
            consistency="ONE",
            status_retention_s=status_retention_s,
        )
        _task_keyspace(cassandra, shared)
        try:
            yield cassandra
        finally:
            cassandra.close()
    else:
        raise ValueError(f"unknown task store {kind!r}")


@pytest.fixture(params=STORES)
def task_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    with _make_store(request.param, tmp_path, STATUS_RETENTION_S) as store:
        yield store


@pytest.fixture(params=STORES)
def short_retention_task_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[TaskStore]:
    """A store whose status rows expire after `SHORT_RETENTION_S` seconds."""
    with _make_store(request.param, tmp_path, SHORT_RETENTION_S) as store:
        yield store


@contextmanager
def _make_log(kind: str, tmp_path: Path, *, create_topic: bool) -> Iterator[TaskLog]:
    log: TaskLog
    if kind == "embedded":
        from scheduler.logs.embedded import EmbeddedTaskLog

        log = EmbeddedTaskLog(path=str(tmp_path / "log.db"), topic="contract")
    elif kind in ("kafka", "kafka-python", "kafka-kip848"):
        from scheduler.logs.kafka import KafkaTaskLog
        from tests.servers import kafka_bootstrap

        log = KafkaTaskLog(
            bootstrap_servers=kafka_bootstrap(),
            topic=f"contract-{uuid4().hex[:10]}",
            consumer_config={"group.protocol": "consumer"} if kind == "kafka-kip848" else None,
        )
    elif kind == "kafka-secured":
        from scheduler.logs.kafka import KafkaTaskLog
        from tests.servers import secured_kafka

        login = _contract_kafka_user()
        log = KafkaTaskLog(
            bootstrap_servers=secured_kafka().bootstrap,
            topic=f"contract-{uuid4().hex[:10]}",
            producer_config=login,
            consumer_config=login,
        )
    else:
        raise ValueError(f"unknown task log {kind!r}")
    # Producers the tests make are closed here: a Kafka producer left open keeps its thread and
    # its connections, and logs the next broker restart in whatever test runs then.
    made: list[LogProducer] = []
    make = log.producer

    def producer() -> LogProducer:
        made.append(make())
        return made[-1]

    log.producer = producer  # type: ignore[method-assign]
    try:
        if create_topic:
            log.ensure_topic(LOG_PARTITIONS)
        yield log
    finally:
        for each in made:
            each.close()
        if create_topic and kind != "embedded":
            log.delete_topic()  # type: ignore[attr-defined]
        log.close()


@functools.cache
def _contract_kafka_user() -> dict[str, str]:
    from tests.servers import secured_kafka_user

    return secured_kafka_user(
        *(("topic", "contract-*", op) for op in ("Create", "Describe", "Read", "Write")),
        ("topic", "contract-*", "Delete"),  # the fixture's clean-up, not the scheduler's
        *(("group", "contract-*", op) for op in ("Read", "Describe")),
    )


@pytest.fixture(params=LOGS)
def task_log(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TaskLog]:
    _choose_path(request.param, monkeypatch)
    with _make_log(request.param, tmp_path, create_topic=True) as log:
        yield log


@pytest.fixture(params=LOGS)
def task_log_without_topic(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TaskLog]:
    """A log whose topic nobody has created."""
    _choose_path(request.param, monkeypatch)
    with _make_log(request.param, tmp_path, create_topic=False) as log:
        yield log


def _choose_path(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python send for `kafka-python`, the C one (where built) for every other log."""
    from scheduler import speedups

    monkeypatch.setenv(speedups.ENV, "0" if kind == "kafka-python" else "1")


RUN_STORES = ["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)]


@pytest.fixture(params=RUN_STORES)
def run_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A run store on each backend; the Cassandra one shares a fresh keyspace's connection."""
    yield from _make_run_store(request.param, tmp_path, STATUS_RETENTION_S)


@pytest.fixture(params=RUN_STORES)
def short_retention_run_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A run store whose records expire after `SHORT_RETENTION_S` seconds."""
    yield from _make_run_store(request.param, tmp_path, SHORT_RETENTION_S)


def _make_run_store(kind: str, tmp_path: Path, retention_s: float) -> Iterator[Any]:
    if kind == "sqlite":
        from scheduler.stores.runs_sqlite import SqliteRunStore

        runs = SqliteRunStore(path=str(tmp_path / "store.db"), retention_s=retention_s)
        runs.open(create_schema=True)
        try:
            yield runs
        finally:
            runs.close()
        return
    from scheduler.stores.runs_cassandra import CassandraRunStore

    with _make_store("cassandra", tmp_path, STATUS_RETENTION_S) as tasks:
        cassandra_runs = CassandraRunStore(tasks=tasks, retention_s=retention_s)  # type: ignore[arg-type]
        cassandra_runs.open(create_schema=True)
        yield cassandra_runs


@pytest.fixture(params=RUN_STORES)
def schedule_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A schedule store on each backend; the Cassandra one shares a fresh keyspace's
    connection."""
    if request.param == "sqlite":
        from scheduler.stores.schedules_sqlite import SqliteScheduleStore

        schedules = SqliteScheduleStore(path=str(tmp_path / "store.db"))
        schedules.open(create_schema=True)
        try:
            yield schedules
        finally:
            schedules.close()
        return
    from scheduler.stores.schedules_cassandra import CassandraScheduleStore

    with _make_store("cassandra", tmp_path, STATUS_RETENTION_S) as tasks:
        cassandra_schedules = CassandraScheduleStore(tasks=tasks)  # type: ignore[arg-type]
        cassandra_schedules.open(create_schema=True)
        yield cassandra_schedules


@pytest.fixture(params=RUN_STORES)
def batch_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A batch store on each backend; the Cassandra one shares a fresh keyspace's connection."""
    if request.param == "sqlite":
        from scheduler.stores.batch_sqlite import SqliteBatchStore

        sqlite = SqliteBatchStore(path=str(tmp_path / "store.db"))
        sqlite.open(create_schema=True)
        try:
            yield sqlite
        finally:
            sqlite.close()
        return
    from scheduler.stores.batch_cassandra import CassandraBatchStore

    with _make_store("cassandra", tmp_path, STATUS_RETENTION_S) as tasks:
        cassandra = CassandraBatchStore(tasks=tasks)  # type: ignore[arg-type]
        cassandra.open(create_schema=True)
        yield cassandra
