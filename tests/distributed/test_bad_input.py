"""Bad input and bad configuration against the real servers: garbage on the topic is set aside,
a changed partition count is refused, and unreachable servers are named at start."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from scheduler.fleet import LoadGenerator, read_history
from scheduler.partitioning import partition_for
from scheduler.stores.abc import MALFORMED_KEPT_BYTES
from tests.cli.conftest import SCRIPT
from tests.distributed.conftest import PARTITIONS, START_TIMEOUT_S, Fleet, now_ms, wait_for
from tests.servers import cassandra_contact

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]

GARBAGE = [
    b"\x00\xff not json at all",
    b'{"op": "schedule"}',
    b"",
    b"[1, 2, 3]",
    b"[" * 50_000 + b"]" * 50_000,
    b'{"v": 1, "op": "schedule", "oid": "x", "at": 100000000000000000000000000, "uk": "u"}',
]
"""What another producer might write: bytes, JSON missing fields, nothing, the wrong shape,
JSON nested deeper than a parser goes (it once stopped the worker), a due time no store can
hold (its batch was once retried forever)."""


def test_a_malformed_record_is_logged_and_skipped_and_its_partition_keeps_going(
    fleet: Fleet,
) -> None:
    from confluent_kafka import Producer

    worker = fleet.worker("w1")
    worker.wait_until_owning(START_TIMEOUT_S, at_least=PARTITIONS)
    client = fleet.client()
    before = LoadGenerator(
        client, ordering_ids=1, rate_per_s=50, duration_s=1, lead_ms=300, prefix="bad"
    ).start()
    accepted = before.join()
    ordering_id = accepted[0][0]
    partition = partition_for(ordering_id.encode(), PARTITIONS)

    raw = Producer({"bootstrap.servers": fleet.bootstrap, "acks": "all"})
    for value in GARBAGE:
        raw.produce(fleet.topic, key=ordering_id.encode(), value=value, partition=partition)
    raw.produce(fleet.topic, key=None, value=None, partition=partition)  # a tombstone
    assert raw.flush(30) == 0

    # Due later than every task before the garbage, so the ordering id's keys still increase.
    after = LoadGenerator(
        client, ordering_ids=1, rate_per_s=50, duration_s=1, lead_ms=300, prefix="bad"
    ).start()
    accepted += after.join()
    report = fleet.wait_until_executed(accepted, timeout=60)

    def lag() -> int | None:
        rows = {row.partition: row for row in fleet.log.describe_group(fleet.group_id)}
        row = rows[partition]
        return None if row.committed is None else row.end - row.committed

    drained = wait_for(lambda: lag() == 0, 30)
    set_aside = [
        line for line in worker.output().splitlines() if "malformed record at partition" in line
    ]
    print(
        f"\n[malformed] {report.summary()}; {len(set_aside)} records set aside on partition "
        f"{partition}, lag drained {drained}"
    )
    assert report.missing == [] and report.order_violations == []
    assert len(set_aside) == len(GARBAGE) + 1, worker.output()[-3000:]
    assert all(f"partition {partition} " in line for line in set_aside)
    assert drained, "the partition's offsets should move past the garbage"
    assert worker.alive
    assert "Traceback" not in worker.output()
    assert len(read_history(fleet.record)) == report.attempts

    # Kept in Cassandra, where the operator lists them with the CLI, as the workers logged them.
    listed = subprocess.run(
        [SCRIPT, "malformed", "list", "--partition", str(partition), "--json"],
        env={**os.environ, **fleet.env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    kept = json.loads(listed.stdout)
    assert len(kept) == len(GARBAGE) + 1
    offsets = [int(line.split(" offset ")[1].split()[0]) for line in set_aside]
    assert [record["offset"] for record in kept] == sorted(offsets)
    # By size, not position: the raw producer does not promise its records' order on retries.
    sizes = sorted(record["value_bytes"] for record in kept)
    assert sizes == sorted([len(v) for v in GARBAGE] + [0])
    assert any(record["value"] is None for record in kept)  # the tombstone
    (deep,) = [record for record in kept if record["value_bytes"] == 100_000]
    assert deep["value_cut"] and len(deep["value"]) == MALFORMED_KEPT_BYTES


def test_tasks_from_a_producer_with_librdkafkas_default_partitioner_run_and_are_reported(
    fleet: Fleet,
) -> None:
    """Another team's producer, any librdkafka client with default settings: keyed by ordering
    id, but hashed with CRC32, not Kafka's murmur2. Its tasks are valid, so they run; the
    worker says that they sit on other partitions than their ordering ids'."""
    from confluent_kafka import Producer

    worker = fleet.worker("w1")
    worker.wait_until_owning(START_TIMEOUT_S, at_least=PARTITIONS)
    due_ms = now_ms() + 1000
    accepted = [(f"team-{n}", due_ms, "from-elsewhere") for n in range(20)]
    raw = Producer({"bootstrap.servers": fleet.bootstrap, "acks": "all"})  # CRC32 by default
    for oid, at, uk in accepted:
        value = b'{"v":1,"op":"schedule","oid":"%s","at":%d,"uk":"%s"}' % (
            oid.encode(),
            at,
            uk.encode(),
        )
        raw.produce(fleet.topic, key=oid.encode(), value=value)
    assert raw.flush(30) == 0

    report = fleet.wait_until_executed(accepted, timeout=60)
    reported = [line for line in worker.output().splitlines() if "whose partition is" in line]
    print(f"\n[librdkafka default partitioner] {report.summary()}; {len(reported)} warnings")
    assert report.missing == []
    assert reported, worker.output()[-3000:]  # CRC32 and murmur2 disagree on most of 20 keys
    assert all("murmur2" in line for line in reported)
    assert worker.alive and "Traceback" not in worker.output()


def failed_start(fleet: Fleet, name: str, timeout: float = 120, **overrides: str) -> str:
    """Start a worker that must refuse to run; its output."""
    worker = fleet.worker(name, **overrides)
    try:
        code = worker.process.wait(timeout)
    except subprocess.TimeoutExpired:
        worker.kill()
        pytest.fail(f"worker {name} kept running:\n{worker.output()[-3000:]}")
    worker.wait(1)
    output = worker.output()
    assert code != 0, output
    assert "Traceback" not in output, output
    return output


def drop_keyspace(fleet: Fleet, keyspace: str) -> None:
    from scheduler.stores.cassandra import CassandraTaskStore

    hosts, port = cassandra_contact()
    store = CassandraTaskStore(hosts=hosts, port=port, keyspace=keyspace, consistency="ONE")
    try:
        store.drop_keyspace()
    finally:
        store.close()


def error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, output
    return lines[0]


def test_a_kafka_setting_librdkafka_refuses_stops_the_worker_with_one_line(fleet: Fleet) -> None:
    line = error_line(failed_start(fleet, "w1", kafka_config="session.timeout.ms=soon"))
    print(f"\n[kafka config] {line}")
    # SCHEDULER_KAFKA_CONFIG reaches every client: the first one built refuses it.
    assert "librdkafka refused the Kafka" in line
    assert "session.timeout.ms" in line and "SCHEDULER_KAFKA_CONFIG" in line


def test_a_worker_refuses_a_partition_count_that_differs_from_the_topic_or_the_store(
    fleet: Fleet,
) -> None:
    first = fleet.worker("w1")
    first.wait_until_owning(START_TIMEOUT_S)
    assert first.stop(60) == 0

    changed = str(PARTITIONS + 4)
    # A fresh keyspace on the old topic: the topic's count is what refuses it.
    fresh_keyspace = f"{fleet.keyspace}_fresh"
    try:
        topic_error = error_line(
            failed_start(fleet, "w2", partitions=changed, cassandra_keyspace=fresh_keyspace)
        )
    finally:
        drop_keyspace(fleet, fresh_keyspace)
    print(f"\n[partition count] {topic_error}")
    assert f"has {PARTITIONS} partitions" in topic_error
    assert f"SCHEDULER_PARTITIONS={changed}" in topic_error

    other_topic = f"{fleet.topic}-other"
    try:
        store_error = error_line(failed_start(fleet, "w3", partitions=changed, topic=other_topic))
    finally:
        from scheduler.logs.kafka import KafkaTaskLog

        KafkaTaskLog(bootstrap_servers=fleet.bootstrap, topic=other_topic).delete_topic()
    print(f"[partition count] {store_error}")
    assert f"pinned to {PARTITIONS} partitions" in store_error
    assert f"SCHEDULER_PARTITIONS={changed}" in store_error


@pytest.mark.parametrize(
    ("setting", "value"),
    [("SCHEDULER_KAFKA_BOOTSTRAP", "127.0.0.1:1"), ("SCHEDULER_CASSANDRA_HOSTS", "127.0.0.1:1")],
)
def test_an_unreachable_server_at_start_is_named_in_one_line(
    fleet: Fleet, setting: str, value: str
) -> None:
    started = time.monotonic()
    output = failed_start(fleet, "w1", **{setting: value})
    line = error_line(output)
    print(f"\n[unreachable] after {time.monotonic() - started:.1f} s: {line}")
    assert "127.0.0.1:1" in line
    assert setting in line
