"""Index tables on a real Cassandra node that are read a whole partition at a time: no change of
a schedule or end of a run leaves a tombstone that counts towards `tombstone_failure_threshold`
where they are read (the listing index keeps the status in a column; deleted rows are purgeable
at once, `gc_grace_seconds = 0`, since every reader checks a row against its record), and a
keyspace made with the old schedule index (partitioned by trigger type and status) lists every
schedule once opened by this version."""

from __future__ import annotations

import time
from collections.abc import Iterator
from uuid import uuid4

import pytest

from scheduler.bench.reload import tombstones_read
from scheduler.programs.model import Run, RunStatus, StartedBy, StarterKind, run_id_for
from scheduler.schedules import JobState, Schedule, Time, new_job
from scheduler.schedules import job as jobs
from scheduler.schedules.abc import ScheduleRecord
from scheduler.stores.cassandra import CassandraTaskStore
from scheduler.stores.runs_cassandra import CassandraRunStore
from scheduler.stores.schedules_cassandra import CassandraScheduleStore
from tests.servers import cassandra_contact

pytestmark = pytest.mark.cassandra

PURGEABLE_S = 1.5
"""Deletion times are whole seconds, and a tombstone is purgeable once its second has passed:
the deletes of the current second still count (Cassandra's `gc_grace_seconds` of 0)."""


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


def test_deleting_schedules_leaves_no_tombstone_that_counts(tasks: CassandraTaskStore) -> None:
    schedules = opened(tasks)
    for i in range(300):
        schedules.put(ScheduleRecord(cron(f"s{i:03}"), 1))
    for i in range(290):
        schedules.delete(f"s{i:03}")

    assert [r.name for r in schedules.list_schedules()] == [f"s{i}" for i in range(290, 300)]
    time.sleep(PURGEABLE_S)
    assert tombstones_read(schedules, "list_page", ("TIME", "", 100)) == 0


def a_run(i: int) -> Run:
    return Run(
        run_id=run_id_for("clean", f"r{i}"),
        program="clean",
        started_by=StartedBy(StarterKind.OPERATOR, "ann"),
        arguments={},
        status=RunStatus.PENDING,
        created_ms=1_000 + i,
        requested_ms=1_000 + i,
        request_key=f"r{i}",
    )


def test_ended_runs_leave_no_tombstone_where_the_active_ones_are_read(
    tasks: CassandraTaskStore,
) -> None:
    """Also in a keyspace whose `active_runs` had Cassandra's default grace: opening the store
    with the schema sets it."""
    runs = CassandraRunStore(tasks=tasks)
    runs.open(create_schema=True)
    tasks._runner().result(
        f"ALTER TABLE {tasks.keyspace}.active_runs WITH gc_grace_seconds = 864000",
        None,
        "as an older version made it",
        timeout=60,
    )
    runs = CassandraRunStore(tasks=tasks)
    runs.open(create_schema=True)
    created = runs.create_many([a_run(i) for i in range(300)])
    ended = [run.with_status(RunStatus.COMPLETED, ended_ms=5_000) for run in created[:290]]
    assert all(runs.transition_many(ended, {RunStatus.PENDING}))

    assert [run.run_id for run in runs.active("clean")] == [r.run_id for r in created[290:]]
    time.sleep(PURGEABLE_S)
    assert tombstones_read(runs, "active", ("clean",)) == 0


def test_a_schedule_firing_for_days_leaves_one_range_of_tombstones_where_its_jobs_are_read(
    tasks: CassandraTaskStore,
) -> None:
    """Each fire writes a new job and forgets the ended ones past the newest five (`job.trim`):
    as a range delete, not a row tombstone per fire (which Cassandra keeps ten days, so a
    schedule firing every second would make its jobs' read fail within two)."""
    schedules = opened(tasks)
    schedule = cron("s")
    for generation in range(300):
        history = schedules.jobs("s")
        job = new_job(schedule, 1, generation).model_copy(update={"state": JobState.PENDING_LAUNCH})
        trim = jobs.trim(history, job)
        schedules.put_jobs(
            [job],
            delete=[("s", key) for key in trim.one_by_one],
            below=[("s", trim.below)] if trim.below else [],
        )

    assert [j.generation for j in schedules.jobs("s")] == list(range(294, 300))
    assert tombstones_read(schedules, "jobs", ("s",)) <= 2


def test_waits_for_run_ends_leave_no_tombstone_where_run_ends_are_read(
    tasks: CassandraTaskStore,
) -> None:
    """A job waiting for a run of its program to end listens to `run-end:<program>` until it
    stops waiting; every run end of the program reads that key's partition."""
    schedules = opened(tasks)
    for i in range(300):
        schedules.add_key("run-end:clean", f"s{i % 3}")
        schedules.remove_key("run-end:clean", f"s{i % 3}")
    schedules.add_key("run-end:clean", "s9")

    assert schedules.names_for_key("run-end:clean") == ["s9"]
    time.sleep(PURGEABLE_S)
    assert tombstones_read(schedules, "key_names", ("run-end:clean",)) == 0


def test_an_enabled_schedule_is_looked_for_without_making_or_preparing_a_table(
    tasks: CassandraTaskStore, caplog: pytest.LogCaptureFixture
) -> None:
    """What a worker without programs checks at start (`an_enabled_schedule`): a keyspace that
    never had schedules gets no tables, and the driver logs no failed prepare (an ERROR)."""
    from scheduler.schedules.runtime import an_enabled_schedule
    from scheduler.settings import Settings

    settings = Settings(store="cassandra", log="kafka", cassandra_keyspace=tasks.keyspace)
    assert an_enabled_schedule(settings, tasks) is None
    assert "schedules" not in tables(tasks)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    schedules = opened(tasks)
    schedules.put(ScheduleRecord(cron("off"), 1))
    assert an_enabled_schedule(settings, tasks) is None
    schedules.put(ScheduleRecord(cron("on"), 1, enabled=True))
    assert an_enabled_schedule(settings, tasks) == "on"
