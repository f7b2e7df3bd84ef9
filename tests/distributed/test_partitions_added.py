"""Partitions added to the task topic under a running worker, and the way back.

Kafka can add partitions to a topic but never remove them. Afterwards producers send many
ordering ids to other partitions than their stored tasks, so the worker must stop instead of
storing them there, leave them unread, and `scheduler topic move` must bring every unread record
to a new topic of the stored partition count, in order, where a worker runs them all.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from scheduler.client import SchedulerClient
from scheduler.fleet import as_key_tuple, read_history, scheduler_script
from scheduler.logs.kafka import KafkaTaskLog
from scheduler.model import Task, from_epoch_ms
from scheduler.partitioning import partition_for
from tests.distributed.conftest import PARTITIONS, START_TIMEOUT_S, Fleet, now_ms
from tests.distributed.test_bad_input import error_line, failed_start

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]

GROWN = PARTITIONS + 4


def moved_ids(count: int) -> list[str]:
    """Ordering ids whose partition differs between the old and the grown count."""
    ids = (f"grown-{n}" for n in range(10_000))
    moving = (
        oid
        for oid in ids
        if partition_for(oid.encode(), PARTITIONS) != partition_for(oid.encode(), GROWN)
    )
    return [next(moving) for _ in range(count)]


def cli(fleet: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [scheduler_script(), *args],
        env={**os.environ, **fleet.env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_worker_stops_when_partitions_are_added_and_a_move_loses_no_task(fleet: Fleet) -> None:
    worker = fleet.worker("w1")
    worker.wait_until_owning(START_TIMEOUT_S)
    before = [Task(f"before-{n % 10}", from_epoch_ms(now_ms() + 1000), f"b{n}") for n in range(30)]
    unaware = fleet.client()  # its producer learns of new partitions only in 5 minutes
    for future in [unaware.schedule_task(task) for task in before]:
        future.result(30)
    assert fleet.wait_until_executed([as_key_tuple(t.key) for t in before], timeout=60).ok

    admin = AdminClient({"bootstrap.servers": fleet.bootstrap})
    for future in admin.create_partitions([NewPartitions(fleet.topic, GROWN)]).values():
        future.result(30)

    # A producer started after the change sends by the new count; one started before, by the old.
    log = KafkaTaskLog(bootstrap_servers=fleet.bootstrap, topic=fleet.topic)
    aware = SchedulerClient(log=log)
    due = now_ms() + 3000
    after = [Task(oid, from_epoch_ms(due + n), f"a{n}") for n, oid in enumerate(moved_ids(20))]
    late = [Task(f"late-{n % 10}", from_epoch_ms(due + n), f"l{n}") for n in range(20)]
    cancelled = Task(moved_ids(21)[-1], from_epoch_ms(now_ms() + 20_000), "cancelled")
    try:
        partitions = {aware.schedule_task(task).result(30) for task in after}
        for future in [unaware.schedule_task(task) for task in late]:
            future.result(30)
        aware.schedule_task(cancelled).result(30)
        aware.cancel_task(cancelled.key).result(30)  # the same partition: it stays after the task
    finally:
        aware.close()
        log.close()
    assert max(partitions) >= PARTITIONS  # the new partitions are in use

    code = worker.wait(60)
    output = worker.output()
    print(f"\n[partitions added] worker exit {code}: {error_line(output)}")
    assert code == 2, output[-3000:]
    assert f"now has {GROWN} partitions" in error_line(output)
    assert f"partitioned into {PARTITIONS}" in error_line(output)
    assert "scheduler topic move --to" in error_line(output)
    assert "Traceback" not in output

    status = cli(fleet, "group", "status", "--json")  # shown, with the mismatch as a warning
    assert status.returncode == 0, status.stderr
    assert len(json.loads(status.stdout)) == GROWN
    assert f"has {GROWN} partitions" in status.stderr

    refused = error_line(failed_start(fleet, "w2"))
    print(f"[partitions added] restart: {refused}")
    assert f"has {GROWN} partitions" in refused and "scheduler topic move --to" in refused

    target = f"{fleet.topic}-moved"
    try:
        moved = cli(fleet, "topic", "move", "--to", target)
        print(f"[partitions added] topic move:\n{moved.stdout}{moved.stderr}")
        assert moved.returncode == 0, moved.stderr
        assert "moved " in moved.stdout and f"SCHEDULER_TOPIC={target}" in moved.stdout
        again = cli(fleet, "topic", "move", "--to", target)
        assert again.returncode == 0, again.stderr
        assert "moved 0 unread records" in again.stdout  # marked read on the old topic

        successor = fleet.worker("w3", topic=target)
        successor.wait_until_owning(START_TIMEOUT_S)
        accepted = [as_key_tuple(t.key) for t in before + after + late]
        report = fleet.wait_until_executed(accepted, timeout=90)
        print(f"[partitions added] after the move: {report.summary()}")
        assert report.missing == [], report.summary()
        time.sleep(max(0.0, (cancelled.scheduled_ms - now_ms()) / 1000) + 3)
        ran = {execution.key for execution in read_history(fleet.record)}
        assert as_key_tuple(cancelled.key) not in ran  # its cancel was moved after it
        assert successor.alive and "Traceback" not in successor.output()
    finally:
        KafkaTaskLog(bootstrap_servers=fleet.bootstrap, topic=target).delete_topic()


def test_a_worker_stops_when_the_group_assigns_it_an_added_partition(fleet: Fleet) -> None:
    # No record tells it here: the consumer's own metadata refresh finds the new partitions
    # (every 5 minutes by default; every second for this test) and the group assigns them.
    worker = fleet.worker("w1", kafka_config="topic.metadata.refresh.interval.ms=1000")
    worker.wait_until_owning(START_TIMEOUT_S)
    admin = AdminClient({"bootstrap.servers": fleet.bootstrap})
    for future in admin.create_partitions([NewPartitions(fleet.topic, GROWN)]).values():
        future.result(30)
    code = worker.wait(60)
    output = worker.output()
    print(f"\n[partitions assigned] worker exit {code}: {error_line(output)}")
    assert code == 2, output[-3000:]
    assert f"now has {GROWN} partitions" in error_line(output)
    assert "Traceback" not in output


def test_topic_move_refuses_what_would_lose_or_misplace_records(fleet: Fleet) -> None:
    worker = fleet.worker("w1")
    worker.wait_until_owning(START_TIMEOUT_S)
    busy = cli(fleet, "topic", "move", "--to", f"{fleet.topic}-moved")
    print(f"\n[topic move] with a worker: {busy.stderr.strip()}")
    assert busy.returncode == 2 and "still has members" in busy.stderr and "w1" in busy.stderr
    assert worker.stop(60) == 0

    itself = cli(fleet, "topic", "move", "--to", fleet.topic)
    assert itself.returncode == 2 and "the group's own topic" in itself.stderr

    other = KafkaTaskLog(bootstrap_servers=fleet.bootstrap, topic=f"{fleet.topic}-other")
    try:
        other.ensure_topic(3)
        mismatched = cli(fleet, "topic", "move", "--to", other.topic)
        print(f"[topic move] to a topic of 3 partitions: {mismatched.stderr.strip()}")
        assert mismatched.returncode == 2
        assert f"already exists with 3 partitions, not the {PARTITIONS}" in mismatched.stderr
    finally:
        other.delete_topic()
        other.close()
    for result in (busy, itself, mismatched):
        assert "Traceback" not in result.stderr


def test_topic_move_holds_a_bounded_number_of_records_whatever_the_backlog(fleet: Fleet) -> None:
    from confluent_kafka import Consumer, Producer

    from scheduler.logs.kafka_move import move_unread

    fleet.log.ensure_topic(PARTITIONS)
    # Partition 0's records are all older than partition 1's: the merge takes every one of
    # partition 0's first, while partition 1's wait; only a paused fetch keeps them few.
    backlog = 1500
    producer = Producer({"bootstrap.servers": fleet.bootstrap, "linger.ms": 20})
    start = now_ms() - 3_600_000
    for partition in (0, 1):
        for n in range(backlog):
            key, value = f"p{partition}-{n % 10}", f"{partition}:{n}"
            timestamp = start + partition * backlog + n
            producer.produce(fleet.topic, value, key, partition=partition, timestamp=timestamp)
    assert producer.flush(30) == 0

    target = KafkaTaskLog(bootstrap_servers=fleet.bootstrap, topic=f"{fleet.topic}-moved")
    try:
        report = move_unread(fleet.log, target, fleet.group_id, PARTITIONS, partition_records=100)
        print(f"\n[topic move] {report.total} records, at most {report.peak_buffered} held")
        assert report.moved == {0: backlog, 1: backlog}
        assert report.peak_buffered <= 4 * 100

        reader = Consumer(target.consumer_settings("check", client_id="check"))
        reader.subscribe([target.topic])
        values: dict[str, list[int]] = {}
        deadline = time.monotonic() + 60
        while sum(map(len, values.values())) < 2 * backlog and time.monotonic() < deadline:
            for message in reader.consume(1000, 0.5):
                if message.error() is None:
                    n = int(message.value().decode().split(":")[1])
                    values.setdefault(message.key().decode(), []).append(n)
        reader.close()
        assert sorted(values) == sorted(f"p{p}-{k}" for p in (0, 1) for k in range(10))
        for key, numbers in values.items():  # every record once, each key's in their order
            assert numbers == list(range(int(key[-1]), backlog, 10)), key
    finally:
        target.delete_topic()
        target.close()
