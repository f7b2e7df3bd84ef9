"""What the embedded log promises beyond the port contract: durability and group hand-over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from scheduler.logs.abc import LogRecord
from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.partitioning import partition_for
from tests.contracts.test_task_log_contract import ALL, Recorder, joined, poll_until

RECORDS = 5000

_WRITER = textwrap.dedent(
    """
    import sys
    from scheduler.logs.embedded import EmbeddedTaskLog

    log = EmbeddedTaskLog(path=sys.argv[1], topic="durable")
    log.ensure_topic(4)
    producer = log.producer()
    futures = [producer.send(b"k%d" % i, b"v%d" % i) for i in range(int(sys.argv[2]))]
    for future in futures:
        future.result(timeout=60)
    print("acknowledged", flush=True)
    sys.stdin.read()  # wait here until killed, without closing the log
    """
)


def test_acknowledged_records_survive_kill_9(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, path, str(RECORDS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "acknowledged"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL

    log = EmbeddedTaskLog(path=path, topic="durable")
    try:
        assert log.partition_count() == 4
        assert sum(lag.end for lag in log.describe_group("any")) == RECORDS
        records: list[LogRecord] = []
        consumer, _ = joined(log, "reader", records=records)
        poll_until([consumer], lambda got: len(got) >= RECORDS, records=records)
        assert sorted(r.value or b"" for r in records) == sorted(b"v%d" % i for i in range(RECORDS))
    finally:
        log.close()


def test_reading_resumes_from_the_file_after_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    log = EmbeddedTaskLog(path=path, topic="t")
    log.ensure_topic(4)
    producer = log.producer()
    for i in range(100):
        producer.send(b"same", b"%d" % i)
    assert producer.flush(30) == 0
    consumer, _ = joined(log, "g")
    consumer.commit({partition_for(b"same", 4): 40})
    consumer.close()
    log.close()

    reopened = EmbeddedTaskLog(path=path, topic="t")
    try:
        records: list[LogRecord] = []
        again, _ = joined(reopened, "g", records=records)
        poll_until([again], lambda got: len(got) >= 60, records=records)
        assert [r.value for r in records] == [b"%d" % i for i in range(40, 100)]
    finally:
        reopened.close()


def test_a_new_member_gets_a_partition_only_after_the_old_owner_revoked_it() -> None:
    log = EmbeddedTaskLog(path=None, topic="t")
    log.ensure_topic(4)
    try:
        first, _ = joined(log, "g", "first")
        second = log.consumer("g", client_id="second")
        second.subscribe(Recorder())

        second.poll(10, 0.05)
        assert second.assignment() == set(), "the first member has not revoked anything yet"

        first.poll(10, 0.05)
        second.poll(10, 0.05)
        assert first.assignment() | second.assignment() == ALL
        assert not first.assignment() & second.assignment()
        assert len(second.assignment()) == 2
    finally:
        log.close()


def test_retention_deletes_records_every_group_has_committed(tmp_path: Path) -> None:
    log = EmbeddedTaskLog(path=str(tmp_path / "log.db"), topic="t")
    log.ensure_topic(1)
    try:
        producer = log.producer()
        for i in range(10):
            producer.send(b"k", b"%d" % i)
        assert producer.flush(30) == 0
        log.commit("a", {0: 7})
        log.commit("b", {0: 4})

        log.apply_retention()

        records: list[LogRecord] = []
        consumer = log.consumer("late", client_id="c")
        consumer.subscribe(Recorder())
        poll_until([consumer], lambda got: len(got) >= 6, records=records)
        assert [r.offset for r in records] == list(range(4, 10))
        consumer.close()
    finally:
        log.close()


def test_consumers_on_their_own_threads_split_the_records_without_loss() -> None:
    """Members join while producers send; committing on revoke hands over without gaps."""
    log = EmbeddedTaskLog(path=None, topic="t")
    log.ensure_topic(8)
    total, members = 3000, 3
    received: list[list[bytes]] = [[] for _ in range(members)]
    done = threading.Event()
    failures: list[BaseException] = []

    def consume(index: int) -> None:
        consumer = log.consumer("g", client_id=f"c{index}")
        positions: dict[int, int] = {}

        class CommitOnRevoke(Recorder):
            def on_revoked(self, partitions: list[int]) -> None:
                consumer.commit({p: positions.pop(p) for p in partitions if p in positions})

        consumer.subscribe(CommitOnRevoke())
        try:
            while not done.is_set():
                for record in consumer.poll(100, 0.05):
                    received[index].append(record.value or b"")
                    positions[record.partition] = record.offset + 1
                if sum(map(len, received)) >= total:
                    done.set()
        except BaseException as error:
            failures.append(error)
            done.set()
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(members)]
    producer = log.producer()
    try:
        for i, thread in enumerate(threads):
            thread.start()
            for j in range(total // members):
                producer.send(b"key-%d" % j, b"%d-%d" % (i, j))
        assert producer.flush(30) == 0
        assert done.wait(30), f"only {sum(map(len, received))} of {total} records arrived"
        for thread in threads:
            thread.join(30)
    finally:
        log.close()

    assert not failures
    everything = [value for values in received for value in values]
    assert sorted(everything) == sorted(
        b"%d-%d" % (i, j) for i in range(members) for j in range(total // members)
    )
