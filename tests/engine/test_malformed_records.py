"""Records another producer wrote to the log that are not scheduler messages: each is set aside
(logged with its partition and offset) and the partition goes on with the records after it."""

from __future__ import annotations

import logging

import pytest

from scheduler import Task
from scheduler.partitioning import partition_for
from scheduler.stores.abc import MALFORMED_KEPT_BYTES
from scheduler.testing import embedded_engine
from tests.engine.flaky import FlakyStore
from tests.engine.helpers import Recorder, soon

PARTITIONS = 4


@pytest.mark.parametrize(
    "value",
    [
        b"\x00\xff not json",
        b'{"op": "schedule"}',
        b"[" * 50_000 + b"]" * 50_000,  # deeper than the parser goes: it stopped the worker
        # A due time past 64 bits: the store cannot hold it, and the batch was retried forever.
        b'{"v":1,"op":"schedule","oid":"acct","at":1000000000000000000000000000000,"uk":"u"}',
        b'{"v":1,"op":"schedule","oid":"acct","at":253402300800000,"uk":"u"}',  # year 10000
    ],
    ids=["bytes", "missing-fields", "nested-too-deep", "at-past-64-bits", "at-year-10000"],
)
def test_a_malformed_record_is_set_aside_and_its_partition_goes_on(
    data_dir, caplog, value: bytes
) -> None:
    recorder = Recorder()
    before, after = Task("acct", soon(), "before"), Task("acct", soon(50), "after")
    partition = partition_for(b"acct", PARTITIONS)
    caplog.set_level(logging.ERROR, logger="scheduler.worker")
    with embedded_engine(recorder, data_dir=data_dir, partitions=PARTITIONS) as engine:
        engine.client.schedule_task(before).result(10)
        producer = engine.client.log.producer()
        try:
            producer.send(b"acct", value).result(10)
        finally:
            producer.close()
        engine.client.schedule_task(after).result(10)
        engine.join()
        assert engine.worker.fatal_error is None
        (kept,) = engine.worker.store.malformed_records()
    assert recorder.keys() == [before.key, after.key]
    set_aside = [r.getMessage() for r in caplog.records if "malformed record" in r.getMessage()]
    assert len(set_aside) == 1, set_aside
    assert f"malformed record at partition {partition} offset {kept.offset} " in set_aside[0]
    # Kept in the store for `scheduler malformed list`, after the log lines are gone.
    assert (kept.partition, kept.key, kept.value_bytes) == (partition, b"acct", len(value))
    assert kept.value == value[:MALFORMED_KEPT_BYTES]
    assert kept.reason in set_aside[0]


def test_a_malformed_record_the_store_cannot_keep_is_read_again_until_it_can(
    data_dir, caplog
) -> None:
    """Its offset is not committed past before it is kept: the partition is read again (as when
    tasks cannot be stored), and each task still runs once."""
    recorder = Recorder()
    before, after = Task("acct", soon(), "before"), Task("acct", soon(50), "after")
    partition = partition_for(b"acct", PARTITIONS)
    flaky: list[FlakyStore] = []

    def wrap(store):
        flaky.append(FlakyStore(store))
        flaky[0].fail_next("set_aside", partition, times=2)
        return flaky[0]

    caplog.set_level(logging.ERROR, logger="scheduler.worker")
    with embedded_engine(
        recorder, data_dir=data_dir, partitions=PARTITIONS, wrap_store=wrap
    ) as engine:
        engine.client.schedule_task(before).result(10)
        producer = engine.client.log.producer()
        try:
            producer.send(b"acct", b"not json").result(10)
        finally:
            producer.close()
        engine.client.schedule_task(after).result(10)
        engine.join()
        kept = engine.worker.store.malformed_records()
    assert flaky[0].injected == 2
    assert [(r.partition, r.value) for r in kept] == [(partition, b"not json")]
    assert recorder.keys() == [before.key, after.key]
    refused = [r.getMessage() for r in caplog.records if "could not persist" in r.getMessage()]
    assert len(refused) == 1, refused  # the second refusal in a row is said with the next ones
    assert "injected failure of set_aside" in refused[0]


def test_a_task_on_another_partition_than_its_ordering_ids_runs_and_is_reported(
    data_dir, caplog
) -> None:
    """Another producer keyed it differently, or hashed the key with CRC32 (librdkafka's
    default): the task is valid, so it runs, and the worker says why it may run out of order."""
    from scheduler import metrics

    recorder = Recorder()
    home = partition_for(b"acct", PARTITIONS)
    stray_key = next(
        k for k in (f"k{i}".encode() for i in range(100)) if partition_for(k, PARTITIONS) != home
    )
    elsewhere = partition_for(stray_key, PARTITIONS)
    due_ms = int(soon().timestamp() * 1000)
    before = metrics.MISROUTED._value.get()
    caplog.set_level(logging.WARNING, logger="scheduler.worker")
    with embedded_engine(recorder, data_dir=data_dir, partitions=PARTITIONS) as engine:
        engine.client.schedule_task(Task("acct", soon(), "routed")).result(10)
        producer = engine.client.log.producer()
        try:
            for n in range(2):
                value = b'{"v":1,"op":"schedule","oid":"acct","at":%d,"uk":"stray-%d"}' % (
                    due_ms,
                    n,
                )
                producer.send(stray_key, value).result(10)
        finally:
            producer.close()
        engine.join()
    assert sorted(key.uniqueness_key for key in recorder.keys()) == ["routed", "stray-0", "stray-1"]
    warnings = [r.getMessage() for r in caplog.records if "whose partition is" in r.getMessage()]
    assert len(warnings) == 1, warnings  # the first of a partition, then one in a thousand
    assert f"at partition {elsewhere} " in warnings[0]
    assert f"ordering id 'acct', whose partition is {home} " in warnings[0]
    assert "murmur2" in warnings[0]
    assert metrics.MISROUTED._value.get() - before == 2
