"""The reload mark on real servers: committed with the partition's offset in Kafka's consumer
group, past the completed tasks, so that the partition's next owner reads no Cassandra tombstone
of theirs (before, it read every one since the bucket's start, and past 100,000 the read fails)."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from scheduler.bench.reload import tombstones_read
from scheduler.engine.reload_mark import ReloadMark
from scheduler.fleet import as_key_tuple
from scheduler.logs.kafka_topic_id import untagged
from scheduler.model import Task, from_epoch_ms
from scheduler.stores.cassandra import CassandraTaskStore
from tests.distributed.conftest import START_TIMEOUT_S, Fleet, now_ms, wait_for
from tests.distributed.test_retention import ids_on

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]

PARTITION = 1
COUNT = 600
FAR = 2**62


def committed_mark(fleet: Fleet) -> ReloadMark | None:
    """The partition's mark as Kafka's group coordinator holds it (what any tool sees)."""
    admin = AdminClient({"bootstrap.servers": fleet.bootstrap})
    wanted = ConsumerGroupTopicPartitions(fleet.group_id, [TopicPartition(fleet.topic, PARTITION)])
    [future] = admin.list_consumer_group_offsets([wanted]).values()
    [found] = future.result(30).topic_partitions
    committed_on, mark = untagged(found.metadata or "")
    assert committed_on == fleet.log.topic_id()  # every commit names the topic it was made on
    return ReloadMark.decode(mark)


def test_the_mark_passes_completed_tasks_and_the_next_owner_reads_none_of_their_tombstones(
    fleet: Fleet,
) -> None:
    oids = ids_on(PARTITION, 10)
    client = fleet.client()
    first = fleet.worker("w1")
    first.wait_until_owning(START_TIMEOUT_S)
    due = now_ms() + 1000
    tasks = [Task(oids[n % 10], from_epoch_ms(due + n), f"t-{n}") for n in range(COUNT)]
    for future in [client.schedule_task(task) for task in tasks]:
        assert future.result(30) == PARTITION
    assert fleet.wait_until_executed([as_key_tuple(t.key) for t in tasks], timeout=90).ok

    # The mark stays 30 s behind now, moves every 5 s and is committed within 5 s of moving.
    last = max(task.key.cursor for task in tasks)
    mark = wait_for(
        lambda: (m := committed_mark(fleet)) is not None and m.after > last and m, timeout=90
    )
    assert mark.stragglers == ()
    assert first.stop(60) == 0

    store = CassandraTaskStore(
        hosts=fleet.cassandra_hosts,
        port=fleet.cassandra_port,
        keyspace=fleet.keyspace,
        consistency="ONE",
    )
    store.open(create_schema=False)
    try:
        buckets = sorted({task.scheduled_ms // store.bucket_ms for task in tasks})
        from_start = sum(
            tombstones_read(
                store, "load_after", (PARTITION, b, b * store.bucket_ms, "", "", FAR, 1000)
            )
            for b in buckets
        )
        mark_bucket = mark.after[0] // store.bucket_ms
        from_mark = tombstones_read(
            store, "load_after", (PARTITION, mark_bucket, *mark.after, FAR, 1000)
        )
    finally:
        store.close()
    print(f"\n[reload mark] tombstones read from the bucket start {from_start}, from the mark 0")
    assert from_start >= COUNT  # what a next owner read before the mark existed
    assert from_mark == 0

    # The next owner starts from the mark and runs new work as usual.
    second = fleet.worker("w2")
    second.wait_until_owning(START_TIMEOUT_S)
    more = Task(oids[0], from_epoch_ms(now_ms() + 500), "after-the-mark")
    client.schedule_task(more).result(30)
    assert fleet.wait_until_executed([as_key_tuple(more.key)], timeout=60).ok
    assert "Traceback" not in second.output()
