"""The schedule listing index on a real Cassandra node: a status change leaves no tombstone where
the listings read, and a keyspace made with the old index (partitioned by trigger type and
status) lists every schedule once opened by this version."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import uuid4

import pytest

from scheduler.bench.reload import tombstones_read
from scheduler.schedules import Schedule, Time
from scheduler.schedules.abc import ScheduleRecord
from scheduler.stores.cassandra import CassandraTaskStore
from scheduler.stores.schedules_cassandra import CassandraScheduleStore
from tests.servers import cassandra_contact

pytestmark = pytest.mark.cassandra


def cron(name: str) -> Schedule:
    return Schedule(name=name, program="clean", trigger=Time(cron="5 * * * *"))


@pytest.fixture
def tasks() -> Iterator[CassandraTaskStore]:
    hosts, port = cassandra_contact()
    store = CassandraTaskStore(
        hosts=hosts,
        port=port,
        keyspace=f"index_{uuid4().hex[:12]}",
        replication={"class": "SimpleStrategy", "replication_factor": 1},
        consistency="ONE",
    )
    store.open(create_schema=True)
    try:
        yield store
    finally:
        store.drop_keyspace()
        store.close()


def opened(tasks: CassandraTaskStore) -> CassandraScheduleStore:
    schedules = CassandraScheduleStore(tasks=tasks)
    schedules.open(create_schema=True)
    return schedules


def tables(tasks: CassandraTaskStore) -> set[str]:
    rows = tasks._runner().one(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
        (tasks.keyspace,),
        "list tables",
    )
    return {row[0] for row in rows}


def test_enabling_schedules_leaves_no_tombstone_where_the_listings_read(
    tasks: CassandraTaskStore,
) -> None:
    schedules = opened(tasks)
    count = 300
    for i in range(count):
        schedules.put(ScheduleRecord(cron(f"s{i:03}"), 1))
    for i in range(count):
        schedules.put(ScheduleRecord(cron(f"s{i:03}"), 1, enabled=True))

    assert schedules.list_schedules(status="DISABLED") == []
    assert len(schedules.list_schedules(status="ENABLED", limit=count)) == count
    # Each listing query, traced: the old index had moved 300 rows out of (TIME, DISABLED),
    # leaving 300 row tombstones that the DISABLED listing read.
    assert tombstones_read(schedules, "list_page_of", ("TIME", "", "DISABLED", 100)) == 0
    assert tombstones_read(schedules, "list_page", ("TIME", "", 100)) == 0


def test_a_keyspace_with_the_old_index_lists_every_schedule_once_reopened(
    tasks: CassandraTaskStore,
) -> None:
    schedules = opened(tasks)
    for i in range(6):
        schedules.put(ScheduleRecord(cron(f"s{i}"), 1, enabled=i % 2 == 0))
    # The keyspace as the old version left it: its index table, and none of the new one.
    run, ks = tasks._runner(), tasks.keyspace
    run.result(f"DROP TABLE {ks}.schedules_by_type", None, "drop", timeout=60)
    run.result(
        f"CREATE TABLE {ks}.schedules_by_kind (trigger_type text, status text, name text, "
        "PRIMARY KEY ((trigger_type, status), name))",
        None,
        "create",
        timeout=60,
    )

    reopened = opened(tasks)

    assert "schedules_by_kind" not in tables(tasks)
    names = lambda records: [r.name for r in records]  # noqa: E731
    assert names(reopened.list_schedules()) == [f"s{i}" for i in range(6)]
    assert names(reopened.list_schedules(status="ENABLED")) == ["s0", "s2", "s4"]
    assert names(reopened.list_schedules(trigger_type="TIME", status="DISABLED")) == [
        "s1",
        "s3",
        "s5",
    ]
    # Written after the copy, at a later time than its record's: the new status wins.
    reopened.put(ScheduleRecord(cron("s1"), 1, enabled=True))
    assert names(reopened.list_schedules(status="ENABLED")) == ["s0", "s1", "s2", "s4"]


def test_a_copy_loses_to_a_schedule_written_after_the_record_it_read(
    tasks: CassandraTaskStore,
) -> None:
    """The copy writes each index row at its record's write time: an index row written later
    (a status change racing the copy, which writes its index row before its record) stays."""
    schedules = opened(tasks)
    schedules.put(ScheduleRecord(cron("s"), 1))  # DISABLED, the record the copy reads
    [(name, kind, status, at)] = schedules._one("all_kinds", (), "read")
    schedules._one("list_add", ("TIME", "s", "ENABLED"), "a racing status change's index row")
    schedules._one("list_add_at", (kind, name, status, at), "the copy's row")
    rows = schedules._one("list_page_of", ("TIME", "", "ENABLED", 10), "read")
    assert rows == [("s",)]
