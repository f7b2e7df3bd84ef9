"""The task topic deleted under running workers, or deleted and created again under its name.

Kafka deletes the group's committed offsets with the topic, but a topic created again under the
same name is a new one whose offsets start at 0 again, and a worker that ran across the deletion
holds offsets of the old one. The worker must stop rather than go on with them, and an old
offset committed late must not make the next owner skip the new topic's first records.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from scheduler.client import SchedulerClient
from scheduler.errors import TopicMissingError
from scheduler.fleet import as_key_tuple
from scheduler.logs.kafka import KafkaTaskLog
from scheduler.model import Task, from_epoch_ms
from tests.distributed.conftest import PARTITIONS, START_TIMEOUT_S, Fleet, now_ms, wait_for
from tests.distributed.test_bad_input import error_line

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]

ORDERING_IDS = [f"again-{n}" for n in range(PARTITIONS)]


def send(fleet: Fleet, prefix: str, per_id: int) -> list[Task]:
    """`per_id` tasks of each ordering id, due in a second, sent by a producer started now (one
    started before the deletion is another story: see docs/kafka.md)."""
    due = now_ms() + 1000
    tasks = [
        Task(oid, from_epoch_ms(due + n), f"{prefix}{n}")
        for n in range(per_id)
        for oid in ORDERING_IDS
    ]
    log = KafkaTaskLog(bootstrap_servers=fleet.bootstrap, topic=fleet.topic)
    client = SchedulerClient(log=log)
    try:
        for future in [client.schedule_task(task) for task in tasks]:
            future.result(30)
    finally:
        client.close()
        log.close()
    return tasks


def run(fleet: Fleet, tasks: list[Task]) -> None:
    report = fleet.wait_until_executed([as_key_tuple(t.key) for t in tasks], timeout=90)
    assert report.missing == [], report.summary()


def delete_topic(fleet: Fleet) -> None:
    fleet.log.delete_topic()

    def gone() -> bool:
        try:
            fleet.log.topic_id()
        except TopicMissingError:
            return True
        return False

    wait_for(gone, timeout=30)


def committed(fleet: Fleet) -> list[TopicPartition]:
    """The group's committed offsets as the brokers hold them, metadata and all."""
    reader = Consumer({"bootstrap.servers": fleet.bootstrap, "group.id": fleet.group_id})
    try:
        wanted = [TopicPartition(fleet.topic, p) for p in range(PARTITIONS)]
        return [tp for tp in reader.committed(wanted, timeout=30) if tp.offset >= 0]
    finally:
        reader.close()


def test_a_worker_stops_when_its_topic_is_deleted_and_a_new_one_loses_nothing(
    fleet: Fleet,
) -> None:
    worker = fleet.worker("w1")
    worker.wait_until_owning(START_TIMEOUT_S)
    run(fleet, send(fleet, "old", per_id=2))

    delete_topic(fleet)
    code = worker.wait(60)  # missing at two checks in a row, 10 s apart
    output = worker.output()
    print(f"\n[topic deleted] worker exit {code}: {error_line(output)}")
    assert code == 2, output[-3000:]
    assert f"topic {fleet.topic!r} on Kafka at" in error_line(output)
    assert "was deleted while this worker ran" in error_line(output)
    assert "Start the workers again" in error_line(output)
    assert "Traceback" not in output

    successor = fleet.worker("w2")  # creates the missing topic, as any worker does at start
    successor.wait_until_owning(START_TIMEOUT_S)
    run(fleet, send(fleet, "new", per_id=2))
    assert successor.alive and "Traceback" not in successor.output()


def test_offsets_of_a_topic_deleted_and_created_again_skip_none_of_the_new_records(
    fleet: Fleet,
) -> None:
    worker = fleet.worker("w1")
    worker.wait_until_owning(START_TIMEOUT_S)
    old = send(fleet, "old", per_id=1)
    run(fleet, old)
    # What the worker holds and may commit late: the offsets past every old record.
    late = wait_for(lambda: sum(tp.offset for tp in committed(fleet)) == len(old), timeout=30)
    assert late
    late_commits = committed(fleet)

    delete_topic(fleet)
    fleet.log.ensure_topic(PARTITIONS)
    code = worker.wait(60)
    output = worker.output()
    print(f"\n[topic created again] worker exit {code}: {error_line(output)}")
    assert code == 2, output[-3000:]
    assert "was deleted and created again while this worker ran" in error_line(output)
    assert "Traceback" not in output

    # The late commit (a worker's reload marks go out every few seconds, a revocation commits
    # what is left): the brokers take it for the new topic like any other.
    replay = Consumer({"bootstrap.servers": fleet.bootstrap, "group.id": fleet.group_id})
    try:
        replay.commit(offsets=late_commits, asynchronous=False)
    finally:
        replay.close()
    assert {tp.partition: tp.offset for tp in committed(fleet)} == {
        tp.partition: tp.offset for tp in late_commits
    }
    # Three records per ordering id where the old topic had one: the old offsets are not past
    # the new end, so Kafka's own reset to the first record would not save the first ones.
    new = send(fleet, "new", per_id=3)
    successor = fleet.worker("w2")
    successor.wait_until_owning(START_TIMEOUT_S)
    run(fleet, new)
    assert "were committed on an earlier topic named" in successor.output()
    assert successor.alive and "Traceback" not in successor.output()
