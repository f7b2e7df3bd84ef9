"""The poll loop's offsets when a partition's tree restarts: records dropped while it had no tree
are re-read, never skipped by a later batch. No servers: a fake consumer and TopicSupervisor."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduler.codec import Op, encode
from scheduler.logs.abc import LogRecord
from scheduler.model import TaskKey
from scheduler.stores.sqlite import SqliteTaskStore
from scheduler.worker import Worker

PARTITION = 7


class Done:
    """A resolved pykka future, as far as the worker uses one."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self, timeout: float | None = None) -> Any:
        return self.value


class FakeTopic:
    """`TopicSupervisor.persist`: no future for a partition without a tree (restarting)."""

    def __init__(self) -> None:
        self.has_tree = True
        self.stored: list[int] = []
        self.last_offsets: list[dict[int, int]] = []

    def persist(
        self, batches: Mapping[int, Sequence[object]], last_offsets: Mapping[int, int]
    ) -> Done:
        self.last_offsets.append(dict(last_offsets))
        if not self.has_tree:
            return Done({})
        for partition, commands in batches.items():
            self.stored += [partition] * len(commands)
        return Done({partition: Done(len(commands)) for partition, commands in batches.items()})


class FakeConsumer:
    def __init__(self) -> None:
        self.commits: list[dict[int, int]] = []
        self.seeks: list[tuple[int, int]] = []

    def commit(self, offsets: Mapping[int, int], *, wait: bool = True, **_: object) -> None:
        self.commits.append(dict(offsets))

    def assignment(self) -> set[int]:
        return {PARTITION}

    def committed(self, partitions: Iterable[int]) -> dict[int, int | None]:
        return {partition: 0 for partition in partitions}

    def seek(self, partition: int, offset: int) -> None:
        self.seeks.append((partition, offset))


def records(offsets: Iterable[int]) -> list[LogRecord]:
    def value(offset: int) -> bytes:
        return encode(Op.SCHEDULE, TaskKey.from_ms("a", 1_000 + offset, "u"))

    return [LogRecord(PARTITION, offset, b"a", value(offset), 0) for offset in offsets]


def worker_with(topic: FakeTopic) -> Worker:
    # The store is asked only whether its file is still there: an unopened one has none.
    store = SqliteTaskStore(path=":memory:")
    worker = Worker(log=None, store=store, executor=None)  # type: ignore[arg-type]
    worker._topic = topic  # type: ignore[assignment]
    return worker


def test_a_batch_polled_before_the_restart_cannot_skip_records_dropped_while_restarting() -> None:
    topic, consumer = FakeTopic(), FakeConsumer()
    worker = worker_with(topic)
    worker._process(consumer, records(range(0, 10)))  # stored: a rewind resumes at 10
    topic.has_tree = False  # the partition failed, its restart is pending
    worker._process(consumer, records(range(10, 15)))  # dropped
    # The restart builds a new tree and asks for a rewind while the next batch, polled before
    # the rewind could be applied, is on its way to that new tree.
    topic.has_tree = True
    worker._rewinds.put(PARTITION)
    worker._process(consumer, records(range(15, 20)))
    worker._apply_rewinds(consumer)

    assert consumer.seeks == [(PARTITION, 10)]
    assert max(commit[PARTITION] for commit in consumer.commits) == 10
    assert len(topic.stored) == 10

    worker._process(consumer, records(range(10, 20)))  # re-read after the seek
    assert consumer.commits[-1] == {PARTITION: 20}
    assert len(topic.stored) == 20


class NothingCommitted(FakeConsumer):
    """A group that has never committed for the partition (a new deployment's first records)."""

    def committed(self, partitions: Iterable[int]) -> dict[int, int | None]:
        return {partition: None for partition in partitions}


def test_a_partition_that_fails_before_its_first_commit_is_read_again_from_its_first_record() -> (
    None
):
    topic, consumer = FakeTopic(), NothingCommitted()
    worker = worker_with(topic)
    topic.has_tree = False  # the partition's tree failed on its very first batch
    worker._process(consumer, records(range(0, 5)))  # dropped: nothing stored, nothing committed
    assert not any(PARTITION in commit and commit[PARTITION] > 0 for commit in consumer.commits)

    topic.has_tree = True
    worker._rewinds.put(PARTITION)
    worker._apply_rewinds(consumer)
    assert consumer.seeks == [(PARTITION, 0)]  # the log's first record, whichever it is now

    worker._process(consumer, records(range(0, 5)))
    assert consumer.commits[-1] == {PARTITION: 5}
    assert len(topic.stored) == 5


def test_each_partitions_batch_is_persisted_with_the_offset_of_its_last_record() -> None:
    # TaskPersistence ties its notes of a batch the store refused to that offset: a later batch
    # stored up to it means the refused records were stored again or deleted by retention.
    topic, consumer = FakeTopic(), FakeConsumer()
    worker = worker_with(topic)
    worker._process(consumer, records(range(3, 9)))
    worker._process(consumer, records(range(9, 10)))
    assert topic.last_offsets == [{PARTITION: 8}, {PARTITION: 9}]
