"""A store outage is a state of the partition: the poll loop pauses it, holds the batch it read,
probes the store with backoff on the engine's clock, and resumes it once the batch is stored.
No servers: a fake consumer and TopicSupervisor, and a SteppedClock."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from scheduler.codec import Op, encode
from scheduler.engine.clock import SteppedClock
from scheduler.engine.outage import Backoff
from scheduler.errors import BackendUnavailableError
from scheduler.logs.abc import LogRecord
from scheduler.model import TaskKey
from scheduler.stores.sqlite import SqliteTaskStore
from scheduler.testing import TEST_SETTINGS
from scheduler.worker import Worker

PARTITION = 7
OTHER = 3


class Done:
    """A pykka future, as far as the worker uses one: a value, or an error raised by `get`."""

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error

    def get(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class FakeTopic:
    """`TopicSupervisor.persist`, over a store that is `down` (or a tree that is missing) on
    demand for chosen partitions."""

    def __init__(self) -> None:
        self.down: set[int] = set()
        self.treeless: set[int] = set()
        self.stored: dict[int, list[int]] = {}
        self.last_offsets: dict[int, list[int]] = {}
        """Per partition, the last offset of each batch handed to its tree, refused or not."""
        self.attempts = 0

    def persist(
        self, batches: Mapping[int, Sequence[Any]], last_offsets: Mapping[int, int]
    ) -> Done:
        futures: dict[int, Done] = {}
        for partition, commands in batches.items():
            if partition in self.treeless:
                continue
            self.last_offsets.setdefault(partition, []).append(last_offsets[partition])
            self.attempts += partition == PARTITION
            if partition in self.down:
                futures[partition] = Done(error=BackendUnavailableError("no Cassandra node up"))
                continue
            ms = [command.task.key.scheduled_ms for command in commands]
            self.stored.setdefault(partition, []).extend(ms)
            futures[partition] = Done(len(commands))
        return Done(futures)


class FakeConsumer:
    def __init__(self) -> None:
        self.commits: list[dict[int, int]] = []
        self.paused: set[int] = set()
        self.seeks: list[tuple[int, int]] = []

    def commit(self, offsets: Mapping[int, int], *, wait: bool = True, **_: object) -> None:
        self.commits.append(dict(offsets))

    def committed_up_to(self, partition: int) -> int:
        return max((c[partition] for c in self.commits if partition in c), default=0)

    def pause(self, partitions: Iterable[int]) -> None:
        self.paused.update(partitions)

    def resume(self, partitions: Iterable[int]) -> None:
        self.paused.difference_update(partitions)

    def assignment(self) -> set[int]:
        return {PARTITION, OTHER}

    def seek(self, partition: int, offset: int) -> None:
        self.seeks.append((partition, offset))

    def has_joined(self) -> bool:
        return True

    def problem(self) -> str | None:
        return None


def records(offsets: Iterable[int], partition: int = PARTITION) -> list[LogRecord]:
    def value(offset: int) -> bytes:
        return encode(Op.SCHEDULE, TaskKey.from_ms("a", 1_000 + offset, "u"))

    return [LogRecord(partition, offset, b"a", value(offset), 0) for offset in offsets]


def stored_offsets(topic: FakeTopic, partition: int = PARTITION) -> list[int]:
    return [ms - 1_000 for ms in topic.stored.get(partition, [])]


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock()


def worker_with(topic: FakeTopic, clock: SteppedClock) -> Worker:
    # The store is asked only whether its file is still there: an unopened one has none.
    store = SqliteTaskStore(path=":memory:")
    settings = replace(TEST_SETTINGS, restart_backoff_s=0.5)
    worker = Worker(log=None, store=store, executor=None, settings=settings, poll_clock=clock)  # type: ignore[arg-type]
    worker._topic = topic  # type: ignore[assignment]
    return worker


def test_a_refused_batch_pauses_its_partition_and_commits_nothing_past_it(clock) -> None:
    topic, consumer = FakeTopic(), FakeConsumer()
    worker = worker_with(topic, clock)
    worker._process(consumer, records(range(0, 10)))
    topic.down.add(PARTITION)
    worker._process(consumer, records(range(10, 15)) + records(range(0, 3), OTHER))

    assert consumer.paused == {PARTITION}
    assert consumer.committed_up_to(PARTITION) == 10
    assert consumer.committed_up_to(OTHER) == 3  # the other partition never stopped
    assert worker.health().persist_failing == {PARTITION: 1}
    assert consumer.seeks == []  # nothing is rewound: the batch is held


def test_the_held_batch_is_stored_first_once_the_store_answers_then_the_partition_resumes(
    clock,
) -> None:
    topic, consumer = FakeTopic(), FakeConsumer()
    worker = worker_with(topic, clock)
    topic.down.add(PARTITION)
    worker._process(consumer, records(range(0, 5)))
    topic.down.clear()

    worker._probe_outages(consumer)  # not due yet: the first probe waits the base delay
    assert topic.attempts == 1 and consumer.paused == {PARTITION}

    clock.advance(0.5)
    worker._probe_outages(consumer)
    assert stored_offsets(topic) == [0, 1, 2, 3, 4]
    assert consumer.paused == set()
    assert consumer.committed_up_to(PARTITION) == 5
    assert worker.health().persist_failing == {}

    worker._process(consumer, records(range(5, 8)))
    assert stored_offsets(topic) == list(range(8))
    assert consumer.committed_up_to(PARTITION) == 8


def test_probes_of_a_store_that_keeps_refusing_back_off_up_to_the_cap(clock) -> None:
    topic, consumer = FakeTopic(), FakeConsumer()
    worker = worker_with(topic, clock)
    topic.down.add(PARTITION)
    worker._process(consumer, records(range(0, 5)))
    probes_at: list[float] = []
    for _ in range(200):  # 20 s in steps of 0.1 s
        before = topic.attempts
        clock.advance(0.1)
        worker._probe_outages(consumer)
        if topic.attempts > before:
            probes_at.append(round(clock.monotonic(), 1))
    gaps = [round(b - a, 1) for a, b in zip([0.0, *probes_at], probes_at, strict=False)]
    assert gaps[:5] == [0.5, 1.0, 2.0, 4.0, 5.0]
    assert set(gaps[4:]) == {5.0}
    assert consumer.committed_up_to(PARTITION) == 0
    assert worker.health().persist_failing == {PARTITION: 1 + len(probes_at)}


def test_records_read_after_the_pause_are_held_behind_the_batch_in_log_order(clock) -> None:
    """A log may still return records of a partition it was just told to pause (already
    fetched): they join the held batch, so no later record is stored before an earlier one."""
    topic, consumer = FakeTopic(), FakeConsumer()
    worker = worker_with(topic, clock)
    topic.down.add(PARTITION)
    worker._process(consumer, records(range(0, 5)))
    topic.down.clear()
    worker._process(consumer, records(range(5, 9)))
    assert topic.stored == {}
    assert consumer.paused == {PARTITION}

    clock.advance(0.5)
    worker._probe_outages(consumer)
    assert stored_offsets(topic) == list(range(9))
    assert consumer.committed_up_to(PARTITION) == 9
    # The retry reaches past the refused batch's last offset: it ends the tree's note of it.
    assert topic.last_offsets[PARTITION] == [4, 8]


def test_a_partition_whose_tree_is_restarting_holds_its_batch_until_the_new_tree_takes_it(
    clock,
) -> None:
    topic, consumer = FakeTopic(), FakeConsumer()
    worker = worker_with(topic, clock)
    worker._process(consumer, records(range(0, 10)))
    topic.treeless.add(PARTITION)  # its tree failed (a bug); the restart is pending
    worker._process(consumer, records(range(10, 15)))
    assert consumer.paused == {PARTITION}
    assert consumer.committed_up_to(PARTITION) == 10

    topic.treeless.clear()
    clock.advance(0.5)
    worker._probe_outages(consumer)
    assert stored_offsets(topic) == list(range(15))
    assert consumer.committed_up_to(PARTITION) == 15
    assert consumer.seeks == []


def test_a_partition_revoked_in_outage_leaves_its_held_batch_to_the_next_owner(clock) -> None:
    topic, consumer = FakeTopic(), FakeConsumer()
    worker = worker_with(topic, clock)
    topic.down.add(PARTITION)
    worker._process(consumer, records(range(0, 5)))
    worker._consumer = consumer  # type: ignore[assignment]
    worker._forget([PARTITION])
    assert consumer.paused == set()  # not left paused for its next assignment
    topic.down.clear()
    clock.advance(10)
    worker._probe_outages(consumer)
    assert topic.stored == {}
    assert consumer.committed_up_to(PARTITION) == 0  # read from the log by its next owner
    assert worker.health().persist_failing == {}


def test_the_backoff_doubles_from_its_base_up_to_its_cap() -> None:
    backoff = Backoff(0.25, max_s=3.0)
    assert [backoff.delay(n) for n in range(1, 7)] == [0.25, 0.5, 1.0, 2.0, 3.0, 3.0]
