"""Records the topic's retention deleted before any worker stored them: lost, and said so.

Kafka deletes old records by time or size whatever the consumer groups have read. A fleet down
longer than the retention comes back to a partition whose committed offset is gone; Kafka's
consumer then starts at the first record left, and without a check the deleted tasks would be
skipped without a word.
"""

from __future__ import annotations

import re

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from scheduler.fleet import as_key_tuple, read_history
from scheduler.logs.kafka import KafkaTaskLog
from scheduler.model import Task, from_epoch_ms
from scheduler.partitioning import partition_for
from tests.distributed.conftest import PARTITIONS, START_TIMEOUT_S, Fleet, now_ms, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]

PARTITION = 3


def ids_on(partition: int, count: int) -> list[str]:
    ids = (f"kept-{n}" for n in range(10_000))
    return [oid for oid in ids if partition_for(oid.encode(), PARTITIONS) == partition][:count]


def test_records_deleted_before_a_worker_stored_them_are_reported_and_the_rest_run(
    fleet: Fleet,
) -> None:
    oids = ids_on(PARTITION, 4)
    client = fleet.client()
    first = fleet.worker("w1")
    first.wait_until_owning(START_TIMEOUT_S)
    ran = [Task(oids[n % 4], from_epoch_ms(now_ms() + 500 + n), f"ran-{n}") for n in range(6)]
    for future in [client.schedule_task(task) for task in ran]:
        assert future.result(30) == PARTITION
    assert fleet.wait_until_executed([as_key_tuple(t.key) for t in ran], timeout=60).ok
    assert first.stop(60) == 0  # committed: offset 6

    due = now_ms() + 2000
    later = [Task(oids[n % 4], from_epoch_ms(due + n), f"later-{n}") for n in range(8)]
    for future in [client.schedule_task(task) for task in later]:
        future.result(30)
    # Retention, now: the first 5 of the 8 unread records go (offsets 6 to 10).
    admin = AdminClient({"bootstrap.servers": fleet.bootstrap})
    [deleting] = admin.delete_records([TopicPartition(fleet.topic, PARTITION, 11)]).values()
    deleting.result(30)

    second = fleet.worker("w2")
    second.wait_until_owning(START_TIMEOUT_S)
    kept = later[5:]
    report = fleet.wait_until_executed([as_key_tuple(t.key) for t in kept], timeout=60)
    output = second.output()
    lines = [line for line in output.splitlines() if "deleted from topic" in line]
    print(f"\n[retention] {report.summary()}\n[retention] {lines}")
    assert report.missing == []
    executed = {execution.key for execution in read_history(fleet.record)}
    assert not executed & {as_key_tuple(t.key) for t in later[:5]}
    assert len(lines) == 1 and "ERROR" in lines[0]
    assert f"partition {PARTITION}: 5 records (offsets 6 to 10)" in lines[0]
    assert "retention.ms" in lines[0] and "Traceback" not in output


def test_topic_move_names_records_deleted_before_it_could_copy_them(fleet: Fleet) -> None:
    import os
    import subprocess

    from scheduler.fleet import scheduler_script

    oids = ids_on(PARTITION, 2)
    client = fleet.client()
    worker = fleet.worker("w1")
    worker.wait_until_owning(START_TIMEOUT_S)
    assert worker.stop(60) == 0  # the group exists, nothing committed yet
    tasks = [Task(oids[n % 2], from_epoch_ms(now_ms() + 60_000 + n), f"t-{n}") for n in range(5)]
    for future in [client.schedule_task(task) for task in tasks]:
        future.result(30)
    worker = fleet.worker("w2")  # stores and commits the five
    worker.wait_until_owning(START_TIMEOUT_S)

    def committed() -> int | None:
        return fleet.log.describe_group(fleet.group_id, [PARTITION])[0].committed

    assert wait_for(lambda: committed() == 5, timeout=60)
    assert worker.stop(60) == 0
    more = [Task(oids[n % 2], from_epoch_ms(now_ms() + 60_000 + n), f"m-{n}") for n in range(5)]
    for future in [client.schedule_task(task) for task in more]:
        future.result(30)
    admin = AdminClient({"bootstrap.servers": fleet.bootstrap})
    [deleting] = admin.delete_records([TopicPartition(fleet.topic, PARTITION, 7)]).values()
    deleting.result(30)  # offsets 5 and 6 of the unread 5 to 9

    target = f"{fleet.topic}-moved"
    try:
        moved = subprocess.run(
            [scheduler_script(), "topic", "move", "--to", target],
            env={**os.environ, **fleet.env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        print(f"\n[retention] topic move: {moved.stdout}{moved.stderr}")
        assert moved.returncode == 0, moved.stderr
        assert "moved 3 unread records" in moved.stdout
        assert f"partition {PARTITION} of {fleet.topic!r}: 2 unread records" in moved.stderr
    finally:
        KafkaTaskLog(bootstrap_servers=fleet.bootstrap, topic=target).delete_topic()


def test_records_deleted_while_a_worker_holds_them_in_an_outage_still_run(
    fleet: Fleet, tmp_path, caplog
) -> None:
    """The store refuses the partition's writes (down for days, say) while the topic's retention
    deletes records the worker has read but not stored: the partition is in OUTAGE, holding what
    it read, so once the store is back every record it read runs (nothing is read again). Only
    records the retention deleted before the worker read them (it paused the partition after
    its first refused batch) are reported, once, and do not run."""
    import logging

    from scheduler import metrics
    from scheduler.stores.sqlite import SqliteTaskStore
    from scheduler.testing import TEST_SETTINGS
    from scheduler.worker import Worker
    from tests.engine.flaky import FlakyStore
    from tests.engine.helpers import Recorder

    oids = ids_on(PARTITION, 3)
    fleet.log.ensure_topic(PARTITIONS)
    store = SqliteTaskStore(path=str(tmp_path / "store.db"))
    store.open()
    flaky = FlakyStore(store)
    flaky.unavailable = True  # refused, not a bug: the partition waits in OUTAGE
    recorder = Recorder()
    worker = Worker(
        log=fleet.log,
        store=flaky,  # type: ignore[arg-type]
        executor=recorder,
        settings=TEST_SETTINGS,
        group_id=fleet.group_id,
        client_id="behind",
    )
    deleted_before = metrics.RECORDS_DELETED_UNREAD._value.get()
    client = fleet.client()
    worker.start()
    try:
        assert worker.wait_until_assigned(START_TIMEOUT_S)
        stored = [Task(oids[n], from_epoch_ms(now_ms() + 200), f"stored-{n}") for n in range(3)]
        for future in [client.schedule_task(task) for task in stored]:
            assert future.result(30) == PARTITION  # offsets 0 to 2
        assert wait_for(lambda: len(recorder.keys()) == 3, timeout=60)

        flaky.should_fail = lambda method, partition: (
            method == "write_tasks" and partition == PARTITION
        )
        due = now_ms() + 2000
        refused = [Task(oids[n % 3], from_epoch_ms(due + n), f"later-{n}") for n in range(6)]
        for future in [client.schedule_task(task) for task in refused]:
            future.result(30)  # offsets 3 to 8
        assert wait_for(lambda: flaky.injected >= 2, timeout=30)
        admin = AdminClient({"bootstrap.servers": fleet.bootstrap})
        [deleting] = admin.delete_records([TopicPartition(fleet.topic, PARTITION, 6)]).values()
        deleting.result(30)  # offsets 3 to 5: read, never stored

        with caplog.at_level(logging.ERROR, logger="scheduler.worker"):
            flaky.should_fail = lambda method, partition: False
            left = {t.key for t in refused[3:]}
            assert wait_for(lambda: left <= set(recorder.keys()), timeout=60)
            lines = [r.getMessage() for r in caplog.records if "were deleted" in r.getMessage()]
            # Read before the pause: held, and run. Deleted before it was read: reported.
            first_unread = 6
            if lines:
                said = rf"partition {PARTITION}: \d+ records? \(offsets? (\d+)"
                found = re.search(said, lines[0])
                assert found is not None, lines
                first_unread = int(found.group(1))
            held = {t.key for t in refused[: first_unread - 3]}
            assert wait_for(lambda: held <= set(recorder.keys()), timeout=60)
        print(f"\n[retention] held {len(held)} records through the outage; {lines}")
        assert len(lines) <= 1
        assert metrics.RECORDS_DELETED_UNREAD._value.get() - deleted_before == 6 - first_unread
        ran = sorted(t.key for t in stored + refused[: first_unread - 3] + refused[3:])
        assert sorted(recorder.keys()) == ran  # each once
    finally:
        worker.stop(30)
        store.close()
