"""The TaskLog contract, run against every adapter (see the `task_log` fixture).

Group joins against a real broker take seconds, so the tests poll in loops with generous
deadlines; they never sleep for a fixed time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from uuid import uuid4

import pytest

from scheduler.errors import ConfigurationError
from scheduler.logs.abc import LogConsumer, LogRecord, TaskLog
from scheduler.partitioning import partition_for
from tests.contracts.conftest import LOG_PARTITIONS

JOIN_DEADLINE_S = 30.0
ALL = set(range(LOG_PARTITIONS))


class Recorder:
    """A RebalanceListener that remembers every non-empty call, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, list[int]]] = []

    def on_assigned(self, partitions: list[int]) -> None:
        if partitions:
            self.events.append(("assigned", sorted(partitions)))

    def on_revoked(self, partitions: list[int]) -> None:
        if partitions:
            self.events.append(("revoked", sorted(partitions)))

    def on_lost(self, partitions: list[int]) -> None:
        if partitions:
            self.events.append(("lost", sorted(partitions)))

    def all(self, kind: str) -> set[int]:
        return {p for event, ps in self.events if event == kind for p in ps}


def group() -> str:
    return f"contract-{uuid4().hex[:8]}"


def key_on(partition: int, prefix: str = "key") -> bytes:
    """A key that murmur2 places on `partition`."""
    for i in range(10_000):
        key = f"{prefix}-{i}".encode()
        if partition_for(key, LOG_PARTITIONS) == partition:
            return key
    raise AssertionError(f"no key found for partition {partition}")


def send_all(log: TaskLog, pairs: list[tuple[bytes, bytes]]) -> list[int]:
    producer = log.producer()
    futures = [producer.send(key, value) for key, value in pairs]
    partitions = [future.result(timeout=30) for future in futures]
    producer.close()
    return partitions


def poll_until(
    consumers: list[LogConsumer],
    done: Callable[[list[LogRecord]], bool],
    deadline_s: float = JOIN_DEADLINE_S,
    records: list[LogRecord] | None = None,
) -> list[LogRecord]:
    """Poll every consumer in turn, collecting records, until `done(records)` or the deadline."""
    records = [] if records is None else records
    deadline = time.monotonic() + deadline_s
    while not done(records):
        assert time.monotonic() < deadline, f"gave up after {deadline_s}s with {len(records)}"
        for consumer in consumers:
            records.extend(consumer.poll(500, 0.2))
    return records


def joined(
    log: TaskLog, group_id: str, client_id: str = "c1", records: list[LogRecord] | None = None
) -> tuple[LogConsumer, Recorder]:
    """A consumer that owns every partition; records polled while joining go to `records`."""
    consumer = log.consumer(group_id, client_id=client_id)
    listener = Recorder()
    consumer.subscribe(listener)
    poll_until([consumer], lambda _: consumer.assignment() == ALL, records=records)
    return consumer, listener


def test_send_future_resolves_with_the_partition(task_log: TaskLog) -> None:
    future = task_log.producer().send(b"order-1", b"value")

    assert future.result(timeout=30) == partition_for(b"order-1", LOG_PARTITIONS)


def test_on_durable_runs_once_per_durable_record_before_its_future_resolves(
    task_log: TaskLog,
) -> None:
    producer = task_log.producer()
    counted: list[str] = []
    send = producer.sender(on_durable=lambda: counted.append("sender"))
    futures = [send(f"order-{i}".encode(), b"value") for i in range(20)]
    futures.append(producer.send(b"order-x", b"value", on_durable=lambda: counted.append("send")))
    futures.append(producer.send(b"order-y", b"value"))  # no callback: nothing counted

    futures[0].result(timeout=30)
    assert counted, "the first future resolved before its record was counted"
    assert [f.result(timeout=30) for f in futures[:20]] == [
        partition_for(f"order-{i}".encode(), LOG_PARTITIONS) for i in range(20)
    ]
    for future in futures[20:]:  # each record's own future: their acknowledgements may cross
        future.result(timeout=30)
    assert sorted(counted) == ["send"] + ["sender"] * 20
    producer.close()


def test_send_many_resolves_once_every_record_is_durable_and_keeps_key_order(
    task_log: TaskLog,
) -> None:
    pairs = [(f"bulk-{i % 5}".encode(), str(i).encode()) for i in range(50)]
    assert task_log.producer().send_many(pairs).result(timeout=30) == 50
    records: list[LogRecord] = []
    consumer, _ = joined(task_log, group(), records=records)

    poll_until([consumer], lambda got: len(got) >= len(pairs), records=records)

    for i in range(5):
        key = f"bulk-{i}".encode()
        assert [r.value for r in records if r.key == key] == [
            value for k, value in pairs if k == key
        ]
        assert {r.partition for r in records if r.key == key} == {
            partition_for(key, LOG_PARTITIONS)
        }
    consumer.close()


def test_keys_land_on_kafkas_murmur2_partition(task_log: TaskLog) -> None:
    pairs = [(f"ordering-{i}".encode(), f"v{i}".encode()) for i in range(40)]
    send_all(task_log, pairs)
    records: list[LogRecord] = []
    consumer, _ = joined(task_log, group(), records=records)

    poll_until([consumer], lambda got: len(got) >= len(pairs), records=records)

    assert {(r.key, r.partition) for r in records} == {
        (key, partition_for(key, LOG_PARTITIONS)) for key, _ in pairs
    }
    consumer.close()


def test_a_str_key_is_written_as_its_utf8_bytes(task_log: TaskLog) -> None:
    keys = [f"ordering-{i}-é" for i in range(20)]
    producer = task_log.producer()
    send = producer.sender()
    futures = [send(key, b"by sender") for key in keys]
    futures.append(producer.send(keys[0], b"by send"))
    futures.append(producer.send_many([(keys[1], b"by send_many")]))
    expected = [partition_for(key.encode(), LOG_PARTITIONS) for key in keys]
    assert [f.result(timeout=30) for f in futures[:20]] == expected
    assert futures[20].result(timeout=30) == expected[0]
    assert futures[21].result(timeout=30) == 1
    records: list[LogRecord] = []
    consumer, _ = joined(task_log, group(), records=records)

    poll_until([consumer], lambda got: len(got) >= len(futures), records=records)

    written = {(r.key, r.partition) for r in records}
    assert written == {(key.encode(), partition_for(key.encode(), LOG_PARTITIONS)) for key in keys}
    values_of = {key: [r.value for r in records if r.key == key.encode()] for key in keys[:2]}
    assert values_of == {
        keys[0]: [b"by sender", b"by send"],
        keys[1]: [b"by sender", b"by send_many"],
    }
    consumer.close()
    producer.close()


def test_records_of_a_partition_come_back_in_offset_order(task_log: TaskLog) -> None:
    pairs = [(b"same-key" if i % 2 else f"k{i}".encode(), str(i).encode()) for i in range(60)]
    send_all(task_log, pairs)
    records: list[LogRecord] = []
    consumer, _ = joined(task_log, group(), records=records)

    poll_until([consumer], lambda got: len(got) >= len(pairs), records=records)

    for partition in ALL:
        offsets = [r.offset for r in records if r.partition == partition]
        assert offsets == sorted(set(offsets)), f"partition {partition} out of order"
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    same_key = [r.value for r in records if r.key == b"same-key"]
    assert same_key == [str(i).encode() for i in range(1, 60, 2)]
    assert all(r.timestamp_ms > 0 for r in records)
    consumer.close()


def test_poll_returns_nothing_on_timeout(task_log: TaskLog) -> None:
    consumer, _ = joined(task_log, group())
    started = time.monotonic()

    assert consumer.poll(10, 0.3) == []
    assert time.monotonic() - started >= 0.25
    consumer.close()


def test_a_second_consumer_in_the_group_takes_partitions_incrementally(task_log: TaskLog) -> None:
    group_id = group()
    first, first_events = joined(task_log, group_id, "first")
    second = task_log.consumer(group_id, client_id="second")
    second_events = Recorder()
    second.subscribe(second_events)
    assert first.has_joined() and not second.has_joined()  # the join happens inside poll

    poll_until(
        [first, second],
        lambda _: bool(second.assignment()) and first.assignment() | second.assignment() == ALL,
    )
    assert second.has_joined()
    assert first.problem() is None and second.problem() is None  # nothing refused

    kept, taken = first.assignment(), second.assignment()
    assert kept and taken and not kept & taken
    assert first_events.events[0] == ("assigned", sorted(ALL))
    assert first_events.all("revoked") == taken, "only moved partitions are revoked"
    assert first_events.all("assigned") == ALL and first_events.all("lost") == set()
    assert second_events.all("assigned") == taken and second_events.all("revoked") == set()
    second.close()
    first.close()


def test_closing_a_consumer_revokes_its_partitions(task_log: TaskLog) -> None:
    group_id = group()
    first, first_events = joined(task_log, group_id, "first")
    second = task_log.consumer(group_id, client_id="second")
    second.subscribe(Recorder())
    poll_until([first, second], lambda _: bool(second.assignment()) and bool(first.assignment()))
    owned = first.assignment()
    revoked_before = len(first_events.events)

    first.close()

    assert first_events.events[revoked_before:] == [("revoked", sorted(owned))]
    poll_until([second], lambda _: second.assignment() == ALL)
    second.close()


def test_committed_offsets_survive_a_new_consumer(task_log: TaskLog) -> None:
    group_id, key = group(), key_on(1)
    send_all(task_log, [(key, str(i).encode()) for i in range(10)])
    seen: list[LogRecord] = []
    first, _ = joined(task_log, group_id, records=seen)
    poll_until([first], lambda got: len(got) >= 10, records=seen)
    first.commit({1: 6})
    assert first.committed([1, 2]) == {1: 6, 2: None}
    first.close()

    records: list[LogRecord] = []
    second, _ = joined(task_log, group_id, "c2", records=records)
    poll_until([second], lambda got: len(got) >= 4, records=records)

    assert [(r.offset, r.value) for r in records] == [(i, str(i).encode()) for i in range(6, 10)]
    assert second.committed([1]) == {1: 6}
    second.close()


def test_commit_metadata_travels_with_the_offset_until_a_commit_without_it(
    task_log: TaskLog,
) -> None:
    group_id = group()
    send_all(task_log, [(key_on(p), b"x") for p in (0, 1, 2)])
    first, _ = joined(task_log, group_id)
    mark = '[1,[1767225600000,"o","u"],[]]'
    first.commit({0: 1, 1: 1}, metadata={0: mark})
    assert first.committed_with_metadata([0, 1, 2]) == {0: (1, mark), 1: (1, ""), 2: (None, "")}
    first.close()

    second, _ = joined(task_log, group_id, "c2")
    assert second.committed_with_metadata([0]) == {0: (1, mark)}
    second.commit({0: 1})  # the same offset without metadata: none is kept
    assert second.committed_with_metadata([0]) == {0: (1, "")}
    second.close()


def test_seek_rereads(task_log: TaskLog) -> None:
    key = key_on(2)
    send_all(task_log, [(key, str(i).encode()) for i in range(5)])
    first_pass: list[LogRecord] = []
    consumer, _ = joined(task_log, group(), records=first_pass)
    poll_until([consumer], lambda got: len(got) >= 5, records=first_pass)

    consumer.seek(2, first_pass[1].offset)
    again = poll_until([consumer], lambda got: len(got) >= 4)

    assert [r.value for r in again] == [r.value for r in first_pass[1:]]
    consumer.close()


def test_pause_stops_delivery(task_log: TaskLog) -> None:
    key = key_on(3)
    consumer, _ = joined(task_log, group())
    consumer.pause([3])
    send_all(task_log, [(key, b"held back")])

    assert consumer.poll(10, 1.0) == []

    consumer.resume([3])
    records = poll_until([consumer], lambda got: len(got) >= 1)
    assert [r.value for r in records] == [b"held back"]
    consumer.close()


def test_a_partition_paused_after_a_read_resumes_after_what_was_read_not_before(
    task_log: TaskLog,
) -> None:
    """The worker pauses a partition whose batch the store refused and holds that batch: on
    resume, the log must go on after the held records, neither skipping nor repeating any."""
    key = key_on(3)
    consumer, _ = joined(task_log, group())
    send_all(task_log, [(key, f"first {i}".encode()) for i in range(3)])
    held = poll_until([consumer], lambda got: len(got) >= 3)
    consumer.pause([3])
    send_all(task_log, [(key, f"later {i}".encode()) for i in range(2)])

    assert consumer.poll(10, 1.0) == []

    consumer.resume([3])
    later = poll_until([consumer], lambda got: len(got) >= 2)
    assert [r.value for r in held] == [f"first {i}".encode() for i in range(3)]
    assert [r.value for r in later] == [b"later 0", b"later 1"]
    assert [r.offset for r in later] == [held[-1].offset + 1, held[-1].offset + 2]
    consumer.close()


def test_describe_group_reports_lag(task_log: TaskLog) -> None:
    group_id = group()
    send_all(task_log, [(key_on(0), b"x")] * 5 + [(key_on(1), b"y")] * 2)
    consumer, _ = joined(task_log, group_id, "lag-client")
    consumer.commit({0: 2})

    lags = {lag.partition: lag for lag in task_log.describe_group(group_id)}

    assert set(lags) == ALL
    assert (lags[0].committed, lags[0].end, lags[0].lag) == (2, 5, 3)
    assert (lags[1].committed, lags[1].end, lags[1].lag) == (None, 2, 2)
    assert all("lag-client" in (lag.owner or "") for lag in lags.values())
    some = task_log.describe_group(group_id, [1, 0])  # only those, in partition order
    assert [(lag.partition, lag.committed, lag.end) for lag in some] == [(0, 2, 5), (1, None, 2)]
    consumer.close()


def test_describe_group_of_a_group_that_never_committed_shows_no_offsets(
    task_log: TaskLog,
) -> None:
    send_all(task_log, [(key_on(0), b"x")] * 2)

    lags = task_log.describe_group(group())

    assert [(lag.partition, lag.committed, lag.metadata) for lag in lags] == [
        (p, None, "") for p in sorted(ALL)
    ]
    assert [lag.end for lag in lags if lag.partition == 0] == [2]


def test_describe_group_shows_the_metadata_committed_with_each_offset(task_log: TaskLog) -> None:
    group_id = group()
    send_all(task_log, [(key_on(0), b"x")] * 3 + [(key_on(1), b"y")])
    consumer, _ = joined(task_log, group_id)
    consumer.commit({0: 3, 1: 1}, metadata={0: "mark-3"})
    consumer.close()  # read from a group without members, as at a worker's start

    lags = {lag.partition: lag for lag in task_log.describe_group(group_id, [0, 1])}

    assert {p: (lag.committed, lag.metadata) for p, lag in lags.items()} == {
        0: (3, "mark-3"),
        1: (1, ""),
    }


def test_ensure_topic_reports_the_existing_partition_count(task_log: TaskLog) -> None:
    assert task_log.ensure_topic(LOG_PARTITIONS * 2) == LOG_PARTITIONS
    assert task_log.partition_count() == LOG_PARTITIONS


def test_a_producer_of_a_topic_nobody_created_is_refused_and_creates_nothing(
    task_log_without_topic: TaskLog,
) -> None:
    """Creating the topic is the deployment's (with its partition count), never a send's: on
    Kafka a send could have the broker create it with the broker's default count."""
    with pytest.raises(ConfigurationError, match="does not exist") as refused:
        task_log_without_topic.producer()
    assert "ensure_topic(partitions)" in str(refused.value)
    with pytest.raises(ConfigurationError, match="does not exist"):
        task_log_without_topic.partition_count()


def test_flush_waits_for_every_send(task_log: TaskLog) -> None:
    producer = task_log.producer()
    futures = [producer.send(f"k{i}".encode(), b"v") for i in range(200)]

    assert producer.flush(30) == 0
    assert all(future.done() and future.exception() is None for future in futures)


def delete_before(log: TaskLog, partition: int, offset: int) -> None:
    """Retention, now: the log drops the partition's records below `offset`."""
    from scheduler.logs.embedded import EmbeddedTaskLog

    if isinstance(log, EmbeddedTaskLog):  # it deletes what every group has committed past
        consumer, _ = joined(log, group())
        consumer.commit({partition: offset})
        consumer.close()
        log.apply_retention()
        return
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from scheduler.logs.kafka import KafkaTaskLog
    from tests.servers import secured_kafka

    assert isinstance(log, KafkaTaskLog)
    bootstrap = log.producer_settings()["bootstrap.servers"]
    if "sasl.username" in log.producer_settings():  # retention is the broker's, so its admin's
        admin = secured_kafka().admin_client()
    else:
        admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(log.topic, partition, offset)]).values():
        future.result(30)


def test_first_offsets_move_past_records_the_log_deleted(task_log: TaskLog) -> None:
    assert task_log.first_offsets(ALL) == dict.fromkeys(ALL, 0)
    send_all(task_log, [(key_on(2), str(i).encode()) for i in range(6)])

    delete_before(task_log, 2, 4)

    assert task_log.first_offsets([2, 0]) == {2: 4, 0: 0}
    records: list[LogRecord] = []
    consumer, _ = joined(task_log, group(), records=records)  # starts at the first one left
    poll_until([consumer], lambda got: len(got) >= 2, records=records)
    assert [(r.partition, r.offset) for r in records] == [(2, 4), (2, 5)]
    consumer.close()


def test_a_consumer_names_the_session_timing_after_which_its_group_moves_its_partitions(
    task_log: TaskLog,
) -> None:
    from scheduler.logs.kafka import KafkaTaskLog

    consumer = task_log.consumer(group(), client_id="timing")
    try:
        timing = consumer.session_timing()
    finally:
        consumer.close()
    if isinstance(task_log, KafkaTaskLog):
        assert timing == (10.0, 1.0)  # session.timeout.ms and heartbeat.interval.ms
    else:
        assert timing is None  # one process owns an embedded log's partitions while it lives
