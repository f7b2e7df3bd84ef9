"""Processes that create the same Cassandra tables at once (a worker and a command starting
together) all end up with prepared statements on tables that work.

Cassandra lists a table in its schema a little before it opens the table's storage; a second
creator's `CREATE TABLE IF NOT EXISTS` returns in that window, and a statement prepared then
fails with a server error "Unknown CF <table id>". The stores prepare such a statement again once
the table is open. The real-node test needs a Cassandra (marker `cassandra`); the retry itself is
tested with a stand-in session.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import ServerError

from scheduler.errors import BackendUnavailableError, ConfigurationError
from scheduler.stores._cassandra_session import apply_schema, prepare
from tests.servers import cassandra_contact

OPENING = "java.lang.IllegalArgumentException: Unknown CF cdb40430-ea0c-11f1-85c0-d9f696b9079e"


def server_error(message: str) -> ServerError:
    return ServerError(0, message, {})


@dataclass
class StandInControl:
    agreements: int = 0

    def wait_for_schema_agreement(self, wait_time: float | None = None) -> bool:
        self.agreements += 1
        return True


@dataclass
class StandInSession:
    """Answers each PREPARE with the next of `answers` (an error to raise, or the statement)."""

    answers: list[BaseException | str]
    cluster: Any = None
    prepared: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cluster = type("Cluster", (), {"control_connection": StandInControl()})()

    def prepare(self, text: str) -> Any:
        answer = self.answers.pop(0) if self.answers else text
        if isinstance(answer, BaseException):
            raise answer
        self.prepared.append(text)
        return StandInStatement(text)


@dataclass
class StandInStatement:
    text: str
    is_idempotent: bool = False
    consistency_level: int | None = None


MISSING = 'Error from server: code=2200 [Invalid query] message="table malformed does not exist"'


@dataclass
class StandInRunner:
    session: StandInSession
    target: str = "127.0.0.1:9042"
    keyspace_unknown_for: int = 0
    """How many reads of the keyspace's definition find none (the node has not heard of it)."""
    ddl_answers: list[BaseException] = field(default_factory=list)
    """Errors the next CREATE TABLE statements raise, one each."""
    ran: list[str] = field(default_factory=list)

    def one(self, statement: str, params: Any, what: str) -> list[tuple[Any, ...]]:
        if self.keyspace_unknown_for > 0:
            self.keyspace_unknown_for -= 1
            return []
        return [({"class": "SimpleStrategy", "replication_factor": "1"},)]  # the keyspace exists

    def result(self, statement: str, params: Any, what: str, *, timeout: float) -> Any:
        if self.ddl_answers and statement.startswith("CREATE TABLE"):
            raise self.ddl_answers.pop(0)
        self.ran.append(statement)
        return []


@dataclass
class SteppedClock:
    now: float = 0.0
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def prepare_with(
    session: StandInSession,
    clock: SteppedClock,
    settle_s: float = 60.0,
    *,
    expect_tables: bool = False,
    runner: Any = None,
) -> Any:
    runner = runner or StandInRunner(session)
    statements = {"get": "SELECT a FROM ks.t WHERE k = ?", "put": "INSERT INTO ks.t ..."}
    return prepare(
        runner,
        "ks",
        statements,
        settle_s=settle_s,
        clock=clock,
        sleep=clock.sleep,
        expect_tables=expect_tables,
    )


def test_a_table_a_node_does_not_know_yet_is_waited_for_after_this_process_created_it() -> None:
    # The leader-kill round: on three nodes, the second worker's PREPARE reached a node the
    # first worker's CREATE TABLE had not reached yet, and the worker exited.
    session = StandInSession([InvalidRequest(MISSING), InvalidRequest(MISSING)])
    clock = SteppedClock()

    prepared = prepare_with(session, clock, expect_tables=True)

    assert sorted(prepared) == ["get", "put"]
    assert clock.slept == [0.05, 0.1]
    assert session.cluster.control_connection.agreements == 2


def test_a_missing_table_is_said_at_once_to_a_store_that_did_not_create_the_schema() -> None:
    session = StandInSession([InvalidRequest(MISSING)])
    clock = SteppedClock()

    with pytest.raises(ConfigurationError, match="scheduler schema apply"):
        prepare_with(session, clock)

    assert clock.slept == []


def test_a_table_that_never_appears_fails_after_the_settle_time_with_what_to_do() -> None:
    session = StandInSession([InvalidRequest(MISSING)] * 100)
    clock = SteppedClock()

    with pytest.raises(BackendUnavailableError, match="scheduler schema apply") as raised:
        prepare_with(session, clock, settle_s=3.0, expect_tables=True)

    assert "table malformed does not exist" in str(raised.value)
    assert 3.0 <= clock.now < 5.0


def test_a_keyspace_the_node_asked_does_not_know_yet_is_waited_for_after_creating_it() -> None:
    session = StandInSession([])
    runner = StandInRunner(session, keyspace_unknown_for=2)
    clock = SteppedClock()

    prepared = prepare_with(session, clock, expect_tables=True, runner=runner)

    assert sorted(prepared) == ["get", "put"]
    assert clock.slept == [0.05, 0.1]


def test_a_create_table_in_a_keyspace_the_node_does_not_know_yet_runs_again() -> None:
    session = StandInSession([])
    unknown = InvalidRequest("message=\"Keyspace 'ks' doesn't exist\"")
    runner: Any = StandInRunner(session, ddl_answers=[unknown, unknown])
    clock = SteppedClock()
    ddl = ["CREATE KEYSPACE IF NOT EXISTS ks ...", "CREATE TABLE IF NOT EXISTS ks.t ..."]

    apply_schema(runner, ddl, timeout=60, clock=clock, sleep=clock.sleep)

    assert runner.ran == ddl
    assert clock.slept == [0.05, 0.1]


def test_a_statement_on_a_table_still_opening_is_prepared_again_after_schema_agreement() -> None:
    session = StandInSession([server_error(OPENING), server_error(OPENING)])
    clock = SteppedClock()

    prepared = prepare_with(session, clock)

    assert sorted(prepared) == ["get", "put"]
    assert all(statement.is_idempotent for statement in prepared.values())
    assert session.prepared == ["SELECT a FROM ks.t WHERE k = ?", "INSERT INTO ks.t ..."]
    assert clock.slept == [0.05, 0.1]
    assert session.cluster.control_connection.agreements == 2


def test_the_same_error_from_every_node_the_driver_tried_is_prepared_again() -> None:
    # The driver wraps a PREPARE that failed on each host it asked in NoHostAvailable: CI met
    # this form on one node, with the command's PREPARE beside two creators.
    wrapped = NoHostAvailable(
        "Unable to complete the operation", {"127.0.0.1:9042": server_error(OPENING)}
    )
    session = StandInSession([wrapped])
    clock = SteppedClock()

    prepared = prepare_with(session, clock)

    assert sorted(prepared) == ["get", "put"]
    assert clock.slept == [0.05]


def test_a_node_down_beside_a_table_still_opening_is_not_taken_for_it() -> None:
    down = NoHostAvailable(
        "Unable to complete the operation",
        {"127.0.0.1:9042": server_error(OPENING), "127.0.0.2:9042": ConnectionRefusedError()},
    )
    session = StandInSession([down])

    with pytest.raises(NoHostAvailable):
        prepare_with(session, SteppedClock())


def test_a_table_that_never_opens_fails_after_the_settle_time_naming_the_statement() -> None:
    session = StandInSession([server_error(OPENING)] * 100)
    clock = SteppedClock()

    with pytest.raises(BackendUnavailableError, match="scheduler schema apply") as raised:
        prepare_with(session, clock, settle_s=3.0)

    assert "SELECT a FROM ks.t WHERE k = ?" in str(raised.value)
    assert 3.0 <= clock.now < 5.0


def test_other_server_errors_on_prepare_are_not_retried() -> None:
    session = StandInSession([server_error("java.lang.NullPointerException")])
    clock = SteppedClock()

    with pytest.raises(ServerError, match="NullPointerException"):
        prepare_with(session, clock)

    assert clock.slept == []


def _store_settings(keyspace: str) -> dict[str, Any]:
    hosts, port = cassandra_contact()
    return {
        "hosts": hosts,
        "port": port,
        "keyspace": keyspace,
        "replication": {"class": "SimpleStrategy", "replication_factor": 1},
        "consistency": "ONE",
    }


def _open_all(keyspace: str, create_schema: bool) -> None:
    """Open the task, run, schedule and batch stores of `keyspace`; write and read each."""
    from scheduler.programs.model import Run, RunStatus, StartedBy, StarterKind
    from scheduler.schedules.abc import ScheduleRecord
    from scheduler.schedules.model import Schedule, Time
    from scheduler.stores.batch_cassandra import CassandraBatchStore
    from scheduler.stores.cassandra import CassandraTaskStore
    from scheduler.stores.runs_cassandra import CassandraRunStore
    from scheduler.stores.schedules_cassandra import CassandraScheduleStore

    tasks = CassandraTaskStore(**_store_settings(keyspace))
    try:
        tasks.open(create_schema=create_schema)
        runs = CassandraRunStore(tasks=tasks)
        runs.open(create_schema=create_schema)
        schedules = CassandraScheduleStore(tasks=tasks)
        schedules.open(create_schema=create_schema)
        CassandraBatchStore(tasks=tasks).open(create_schema=create_schema)
        me = uuid.uuid4().hex[:8]
        run = Run(
            run_id=f"run-{me}",
            program="clean",
            started_by=StartedBy(StarterKind.OPERATOR, "ann"),
            arguments={},
            status=RunStatus.PENDING,
            created_ms=1,
            requested_ms=1,
            request_key=f"operator:{me}",
        )
        assert runs.create(run).run_id == run.run_id
        assert runs.get(run.run_id) is not None
        schedule = Schedule(name=f"s-{me}", program="clean", trigger=Time(cron="5 * * * *"))
        schedules.put(ScheduleRecord(schedule, revision=1))
        assert schedules.get(schedule.name) is not None
        assert tasks.read_meta("nothing") is None
    finally:
        tasks.close()


@pytest.mark.cassandra
@pytest.mark.timeout(900)  # some 20 s on an idle node; schema changes slow down under load
def test_two_creators_and_a_command_at_once_in_a_fresh_keyspace_all_work() -> None:
    keyspace = f"race_{uuid.uuid4().hex[:12]}"
    start = threading.Barrier(3)
    outcomes: dict[str, str] = {}

    def creator(name: str) -> None:
        try:
            start.wait(60)
            _open_all(keyspace, create_schema=True)
            outcomes[name] = "ok"
        except BaseException as error:  # reported below, with the other side's
            outcomes[name] = f"{type(error).__name__}: {error}"

    def command() -> None:
        # A command started beside them does not create tables: until they exist it is told
        # to create them (ConfigurationError) and tries again, as `scheduler schedules list`
        # is retried by an operator or a script; anything else is the race.
        try:
            start.wait(60)
            for _ in range(600):
                try:
                    _open_all(keyspace, create_schema=False)
                except ConfigurationError:
                    time.sleep(0.1)  # the tables are not all there yet
                    continue
                outcomes["command"] = "ok"
                return
            outcomes["command"] = "the tables never appeared"
        except BaseException as error:
            outcomes["command"] = f"{type(error).__name__}: {error}"

    threads = [
        threading.Thread(target=creator, args=("worker",)),
        threading.Thread(target=creator, args=("other creator",)),
        threading.Thread(target=command),
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        assert outcomes == {"worker": "ok", "other creator": "ok", "command": "ok"}
    finally:
        from scheduler.stores.cassandra import CassandraTaskStore

        dropper = CassandraTaskStore(**_store_settings(keyspace))
        dropper.drop_keyspace()
        dropper.close()
