"""A partition lost (a Kafka session that timed out: `on_lost`, inside `poll`) and assigned
again, on the embedded log: whatever state it was lost in, paused by a store outage or with an
attempt running, the worker takes the new assignment and every task of the partition runs.

The embedded log never loses partitions by itself, so `LosingLog` makes its consumer do what
librdkafka does after a session timeout: report the partitions lost inside a `poll`, then, as
the group assigns them again, report them assigned, read from their committed offsets."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from scheduler import SchedulerClient, Task
from scheduler.actors import partition_supervisor
from scheduler.actors.partition_executor import PARTITION_LOST
from scheduler.logs.abc import LogConsumer, LogRecord, RebalanceListener, TaskLog
from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.stores.sqlite import SqliteTaskStore
from scheduler.testing import TEST_SETTINGS
from scheduler.worker import Worker
from tests.contracts.conftest import LOG_PARTITIONS
from tests.engine.flaky import FlakyStore
from tests.engine.helpers import Recorder
from tests.engine.test_outage_on_each_log import ordering_id_on, until

PARTITION = 1


class LosingConsumer:
    """An embedded consumer that, when told, loses all its partitions in its next `poll` and
    is assigned them again, each from its committed offset, as a fresh assignment is."""

    def __init__(self, inner: LogConsumer) -> None:
        self._inner = inner
        self._listener: RebalanceListener | None = None
        self.lose = threading.Event()
        self.lost: list[list[int]] = []
        """The partitions of each loss, once the worker's `on_lost` returned."""
        self.reassigned = threading.Event()
        self.lose_on_close = False
        """Lose the partitions inside `close`, as a session that timed out while the worker
        stopped does, instead of having them revoked."""

    def subscribe(self, listener: RebalanceListener) -> None:
        self._listener = listener
        self._inner.subscribe(listener)

    def poll(self, max_records: int, timeout: float) -> list[LogRecord]:
        if self.lose.is_set() and self._listener is not None:
            self.lose.clear()
            owned = sorted(self._inner.assignment())
            self._listener.on_lost(owned)
            self.lost.append(owned)
            committed = self._inner.committed(owned)
            for partition in owned:
                self._inner.seek(partition, committed[partition] or 0)
            self._inner.resume(owned)  # a new assignment is not paused
            self._listener.on_assigned(owned)
            self.reassigned.set()
        return self._inner.poll(max_records, timeout)

    def close(self) -> None:
        if self.lose_on_close and self._listener is not None:
            owned = sorted(self._inner.assignment())
            self._listener.on_lost(owned)
            self.lost.append(owned)
        self._inner.close()

    def pause(self, partitions: Collection[int]) -> None:
        self._inner.pause(partitions)

    def resume(self, partitions: Collection[int]) -> None:
        self._inner.resume(partitions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class LosingLog:
    """An embedded log whose consumers are `LosingConsumer`s."""

    def __init__(self, log: TaskLog) -> None:
        self._log = log
        self.consumers: list[LosingConsumer] = []

    def consumer(self, group_id: str, *, client_id: str) -> LogConsumer:
        consumer = LosingConsumer(self._log.consumer(group_id, client_id=client_id))
        self.consumers.append(consumer)
        return consumer  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[EmbeddedTaskLog]:
    embedded = EmbeddedTaskLog(path=str(tmp_path / "log.db"), topic="lost")
    embedded.ensure_topic(LOG_PARTITIONS)
    yield embedded
    embedded.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteTaskStore]:
    sqlite = SqliteTaskStore(path=str(tmp_path / "store.db"))
    sqlite.open(create_schema=True)
    yield sqlite
    sqlite.close()


def tasks_on(partition: int, count: int, start: int = 0) -> list[Task]:
    due = datetime.now(UTC) + timedelta(milliseconds=300)
    oid = ordering_id_on(partition)
    return [Task(oid, due + timedelta(milliseconds=k), f"k{k:02}") for k in range(start, count)]


def send(client: SchedulerClient, tasks: list[Task]) -> None:
    for future in [client.schedule_task(task) for task in tasks]:
        future.result(timeout=30)


def test_a_partition_lost_while_a_store_outage_pauses_it_is_assigned_again_and_runs_its_tasks(
    log: EmbeddedTaskLog, store: SqliteTaskStore
) -> None:
    refusing = threading.Event()
    refusing.set()
    flaky = FlakyStore(store)
    flaky.unavailable = True
    flaky.should_fail = lambda method, p: (
        method == "write_tasks" and p == PARTITION and refusing.is_set()
    )
    recorder, losing = Recorder(), LosingLog(log)
    worker = Worker(log=losing, store=flaky, executor=recorder, settings=TEST_SETTINGS)  # type: ignore[arg-type]
    client = SchedulerClient(log=log)
    worker.start()
    try:
        assert worker.wait_until_assigned(60)
        first = tasks_on(PARTITION, 5)
        send(client, first)
        until(lambda: PARTITION in worker.health().persist_failing)  # paused, holding them

        consumer = losing.consumers[0]
        consumer.lose.set()
        assert consumer.reassigned.wait(30)
        assert PARTITION in consumer.lost[0]
        assert PARTITION in worker.owned_partitions()
        # Read again from the commit, refused again: in OUTAGE anew, nothing ran meanwhile.
        until(lambda: PARTITION in worker.health().persist_failing)
        assert recorder.keys() == []

        later = tasks_on(PARTITION, 8, start=5)
        send(client, later)
        refusing.clear()
        until(lambda: len(recorder.keys()) >= 8)
        until(lambda: worker.health().persist_failing == {})
        assert worker.failures() == []
    finally:
        client.close()
        worker.stop(60)
    assert recorder.keys() == [task.key for task in first + later]  # once each, in order


def test_a_partition_lost_with_an_attempt_running_cancels_it_and_runs_it_again_once_assigned(
    log: EmbeddedTaskLog, store: SqliteTaskStore
) -> None:
    recorder, losing = Recorder(), LosingLog(log)
    tasks = tasks_on(PARTITION, 3)
    recorder.block = lambda task: task.key == tasks[0].key and not losing.consumers[0].lost
    worker = Worker(log=losing, store=store, executor=recorder, settings=TEST_SETTINGS)  # type: ignore[arg-type]
    client = SchedulerClient(log=log)
    worker.start()
    try:
        assert worker.wait_until_assigned(60)
        send(client, tasks)
        assert recorder.started[tasks[0].key].wait(30)  # running, and holding its ordering id

        consumer = losing.consumers[0]
        consumer.lose.set()
        assert consumer.reassigned.wait(30)
        until(lambda: len(recorder.keys()) >= 4)
        assert worker.failures() == []
        assert PARTITION in worker.owned_partitions()
    finally:
        client.close()
        worker.stop(60)
    # The cancelled attempt runs again on the partition's new tree, then the rest, in order.
    assert recorder.keys() == [tasks[0].key, *[task.key for task in tasks]]


def test_a_stop_that_an_actor_holds_names_that_actor_and_goes_on_without_it(
    log: EmbeddedTaskLog,
    store: SqliteTaskStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What a lost or revoked partition's stop waits on is said: here TaskPersistence hangs in a
    status write that never returns, as a hung driver would."""
    monkeypatch.setattr(partition_supervisor, "STEP_TIMEOUT_S", 0.3)
    caplog.set_level(logging.WARNING)
    hang, release = threading.Event(), threading.Event()
    flaky = FlakyStore(store)

    def hangs(method: str, partition: int) -> bool:
        if method == "record_statuses" and partition == PARTITION and hang.is_set():
            release.wait(60)
        return False

    flaky.should_fail = hangs
    recorder, losing = Recorder(), LosingLog(log)
    worker = Worker(log=losing, store=flaky, executor=recorder, settings=TEST_SETTINGS)  # type: ignore[arg-type]
    client = SchedulerClient(log=log)
    worker.start()
    try:
        assert worker.wait_until_assigned(60)
        hang.set()
        send(client, tasks_on(PARTITION, 1))
        until(lambda: len(recorder.keys()) == 1)
        consumer = losing.consumers[0]
        consumer.lose.set()
        assert consumer.reassigned.wait(30)  # the stop went on without the hung tracker
        said = [r.getMessage() for r in caplog.records if "did not answer within" in r.getMessage()]
        assert said and all(PARTITION_LOST in line for line in said), said
        assert any("TaskPersistence did not answer within 0.3 s" in line for line in said)
    finally:
        release.set()
        client.close()
        worker.stop(60)


def test_a_worker_whose_partitions_are_lost_while_it_stops_stops_and_leaves_their_tasks_pending(
    log: EmbeddedTaskLog, store: SqliteTaskStore
) -> None:
    recorder, losing = Recorder(), LosingLog(log)
    tasks = tasks_on(PARTITION, 2)
    recorder.block = lambda task: task.key == tasks[0].key  # until cancelled
    settings = replace(TEST_SETTINGS, shutdown_deadline_s=0.5)
    worker = Worker(log=losing, store=store, executor=recorder, settings=settings)  # type: ignore[arg-type]
    client = SchedulerClient(log=log)
    worker.start()
    try:
        assert worker.wait_until_assigned(60)
        send(client, tasks)
        assert recorder.started[tasks[0].key].wait(30)
        losing.consumers[0].lose_on_close = True
        worker.stop(60)
        assert worker.health().state == "stopped" and worker.fatal_error is None
        assert losing.consumers[0].lost and PARTITION in losing.consumers[0].lost[0]
    finally:
        client.close()
        worker.stop(60)
    assert recorder.keys() == [tasks[0].key]  # cancelled at the deadline, nothing after it

    # Nothing was lost: the next worker runs the cancelled task and the one behind it.
    recorder.block = lambda task: False
    again = Worker(log=log, store=store, executor=recorder, settings=TEST_SETTINGS)
    again.start()
    try:
        until(lambda: len(recorder.keys()) >= 3)
    finally:
        again.stop(60)
    assert recorder.keys() == [tasks[0].key, tasks[0].key, tasks[1].key]
