"""A fleet of real `scheduler worker` processes on real Kafka and Cassandra, one per test.

Every test gets a fresh topic, keyspace and consumer group (uuid-suffixed), a record file the
workers' `recording_executor` appends to, and a directory of worker logs. At the end the
workers are stopped (killed if they will not stop), the topic is deleted and the keyspace dropped.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import uuid4

import pytest

from scheduler.client import SchedulerClient
from scheduler.fleet import (
    RECORD_ENV,
    HistoryReport,
    KeyTuple,
    WorkerProcess,
    check_history,
    read_history,
)
from scheduler.settings import env_name

if TYPE_CHECKING:
    from scheduler.stores.cassandra import CassandraTaskStore

T = TypeVar("T")

PARTITIONS = 8
SHUTDOWN_DEADLINE_S = 10.0
"""Longer than any task of these tests sleeps, so a graceful change never cancels one."""
POOL_SIZE = 8
START_TIMEOUT_S = 120.0
"""A worker's start (imports, Kafka, Cassandra, schema, first assignment) on a loaded machine."""


def some_sleep(every: int = 7, sleep_ms: int = 200) -> Callable[[int, str], dict[str, int]]:
    """Task data where every `every`-th task sleeps, so some attempts are always in flight.

    `every` should be coprime with the number of ordering ids, so that the sleepers spread over
    all of them instead of overloading a few.
    """

    def data(sequence: int, ordering_id: str) -> dict[str, int]:
        return {"sleep_ms": sleep_ms} if sequence % every == 0 else {}

    return data


def wait_for(check: Callable[[], T], timeout: float, interval: float = 0.25) -> T:
    """Poll `check` until it returns something truthy or `timeout` s pass; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


GROUP_PROTOCOLS = ["classic", pytest.param("consumer", id="kip848")]
"""Kafka's group protocols the fleet tests run under: cooperative-sticky and KIP-848's."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Fleet:
    """The workers, client and backends of one test."""

    def __init__(self, directory: Path) -> None:
        from scheduler.logs.kafka import KafkaTaskLog
        from tests.servers import cassandra_contact, kafka_bootstrap

        suffix = uuid4().hex[:10]
        hosts, port = cassandra_contact()
        self.directory = directory
        self.record = directory / "record.jsonl"
        self.topic = f"dist-{suffix}"
        self.keyspace = f"dist_{suffix}"
        self.group_id = f"dist-{suffix}"
        self.bootstrap = kafka_bootstrap()
        self.cassandra_hosts = hosts
        self.cassandra_port = port
        self.env: dict[str, str] = {
            "SCHEDULER_LOG": "kafka",
            "SCHEDULER_STORE": "cassandra",
            "SCHEDULER_KAFKA_BOOTSTRAP": self.bootstrap,
            "SCHEDULER_CASSANDRA_HOSTS": ",".join(hosts),
            "SCHEDULER_CASSANDRA_PORT": str(port),
            "SCHEDULER_CASSANDRA_KEYSPACE": self.keyspace,
            "SCHEDULER_CASSANDRA_CONSISTENCY": "ONE",
            # No ordering-id indexes (on Cassandra 5.0 two per keyspace, seconds to make and
            # drop: docs/cassandra.md, "What the index costs"); an ordering id is then listed
            # span by span, the path these tests cover (the contracts cover the index's).
            "SCHEDULER_CASSANDRA_ORDERING_INDEX": "false",
            "SCHEDULER_TOPIC": self.topic,
            "SCHEDULER_GROUP_ID": self.group_id,
            "SCHEDULER_PARTITIONS": str(PARTITIONS),
            "SCHEDULER_POOL_SIZE": str(POOL_SIZE),
            "SCHEDULER_SHUTDOWN_DEADLINE_S": str(SHUTDOWN_DEADLINE_S),
            "SCHEDULER_RETRY_BASE_DELAY_S": "0.2",
            "SCHEDULER_RETRY_MAX_DELAY_S": "1",
            "SCHEDULER_EXECUTOR": "scheduler.fleet:recording_executor",
            "SCHEDULER_DATA_DIR": str(directory / "unused"),
            "SCHEDULER_LOG_LEVEL": "INFO",
            RECORD_ENV: str(self.record),
        }
        self.workers: list[WorkerProcess] = []
        self.producer_stats: str | None = None
        """librdkafka's latest statistics (JSON) of the client's producer, every 2 s."""
        self._log = KafkaTaskLog(
            bootstrap_servers=self.bootstrap,
            topic=self.topic,
            producer_config={"statistics.interval.ms": 2000, "stats_cb": self._note_stats},
        )
        self._client: SchedulerClient | None = None

    def use_group_protocol(self, protocol: str) -> None:
        """Have the workers started from now on join with Kafka's `classic` group protocol
        (cooperative-sticky, the default) or KIP-848's `consumer` protocol."""
        if protocol == "consumer":
            self.env["SCHEDULER_KAFKA_CONSUMER_CONFIG"] = "group.protocol=consumer"
        else:
            self.env.pop("SCHEDULER_KAFKA_CONSUMER_CONFIG", None)

    @property
    def log(self) -> Any:
        """The topic's `KafkaTaskLog`, for the group's view and raw admin work."""
        return self._log

    def worker(self, name: str, **overrides: str) -> WorkerProcess:
        """Start `scheduler worker` with this fleet's settings (and `overrides`)."""
        env = {**self.env, **{env_name(k) if k.islower() else k: v for k, v in overrides.items()}}
        process = WorkerProcess(env, name=name, log_path=self.directory / f"{name}.log")
        self.workers.append(process)
        return process

    def _note_stats(self, stats: str) -> None:
        self.producer_stats = stats

    def client(self) -> SchedulerClient:
        """A producer on the fleet's topic, created here if no worker has yet (as a deployment
        runs `scheduler topic create` before its producers start)."""
        if self._client is None:
            self._log.ensure_topic(PARTITIONS)
            self._client = SchedulerClient(log=self._log)
        return self._client

    def history(self, accepted: Collection[KeyTuple]) -> HistoryReport:
        return check_history(accepted, read_history(self.record))

    def wait_until_executed(
        self, accepted: Collection[KeyTuple], timeout: float, stall_s: float = 60.0
    ) -> HistoryReport:
        """Poll the record until every accepted key succeeded; the report. Gives up after
        `timeout`, when no worker is left alive, or when nothing new succeeded for `stall_s`."""
        report = self.history(accepted)
        deadline = time.monotonic() + timeout
        progress = (report.executed, time.monotonic())
        while report.missing and time.monotonic() < deadline:
            if not any(worker.alive for worker in self.workers):
                break
            if time.monotonic() - progress[1] > stall_s:
                break
            time.sleep(0.5)
            report = self.history(accepted)
            if report.executed != progress[0]:
                progress = (report.executed, time.monotonic())
        return report

    @contextlib.contextmanager
    def store(self) -> Iterator[CassandraTaskStore]:
        """A store on the fleet's keyspace, as the workers see it."""
        from scheduler.stores.cassandra import CassandraTaskStore

        store = CassandraTaskStore(
            hosts=self.cassandra_hosts,
            port=self.cassandra_port,
            keyspace=self.keyspace,
            consistency="ONE",
        )
        try:
            yield store
        finally:
            store.close()

    def close(self) -> None:
        running = [process for process in self.workers if process.alive]
        for process in running:
            process.process.terminate()  # all at once: a hung worker costs its timeout once
        for process in running:
            process.stop(SHUTDOWN_DEADLINE_S + 20)
        if self._client is not None:
            self._client.close()
        try:
            self._log.delete_topic()
        finally:
            self._log.close()
            _drop_keyspace(self)


def _drop_keyspace(fleet: Fleet) -> None:
    with fleet.store() as store:
        store.drop_keyspace()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    directory = Path(os.environ.get("SCHEDULER_FLEET_DIR") or tmp_path) / uuid4().hex[:8]
    directory.mkdir(parents=True)
    running = Fleet(directory)
    try:
        yield running
    finally:
        running.close()
