"""The embedded log shared by the processes of one machine: a worker and the CLI beside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.errors import ConfigurationError, TopicMissingError
from scheduler.logs._embedded_members import process_alive
from scheduler.logs.abc import LogRecord
from scheduler.logs.embedded import EmbeddedTaskLog
from tests.contracts.test_task_log_contract import ALL, Recorder, joined, poll_until

PARTITIONS = 4
"""As `tests.contracts.conftest.LOG_PARTITIONS`, which `joined` expects."""

_PRELUDE = """
import json, sys
from scheduler.logs.embedded import EmbeddedTaskLog
log = EmbeddedTaskLog(path=sys.argv[1], topic="shared")
"""

_PRODUCER = """
count, tag = int(sys.argv[2]), sys.argv[3]
assert sys.stdin.readline().strip() == "go"
producer = log.producer()
for start in range(0, count, 250):  # many small transactions, interleaving with the others'
    for i in range(start, min(count, start + 250)):
        producer.send(b"key-%d" % (i % 13), b"%s-%d" % (tag.encode(), i))
    assert producer.flush(60) == 0
log.close()
print("done", flush=True)
"""

_DESCRIBE = """
print(json.dumps([[l.partition, l.committed, l.end, l.owner] for l in log.describe_group("g")]))
log.close()
"""

_MEMBER = """
class Listener:
    def on_assigned(self, partitions): pass
    def on_revoked(self, partitions): pass
    def on_lost(self, partitions): pass

consumer = log.consumer(sys.argv[2], client_id="other-worker")
try:
    consumer.subscribe(Listener())
except Exception as error:
    print(json.dumps([type(error).__name__, str(error)]), flush=True)
    sys.exit(0)
while len(consumer.assignment()) < 4:
    consumer.poll(10, 0.1)
print(json.dumps(["joined", sorted(consumer.assignment())]), flush=True)
sys.stdin.readline()  # hold the group until told (or killed)
consumer.close()
log.close()
"""


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_PRELUDE + code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def line_of(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else "no output"
    return line.strip()


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "log.db")


@pytest.fixture
def log(path: str) -> Iterator[EmbeddedTaskLog]:
    shared = EmbeddedTaskLog(path=path, topic="shared")
    shared.ensure_topic(PARTITIONS)
    yield shared
    shared.close()


def assert_exactly_once_in_order(records: list[LogRecord], values: set[bytes]) -> None:
    assert sorted(r.value or b"" for r in records) == sorted(values), "lost or duplicated"
    for partition in ALL:
        offsets = [r.offset for r in records if r.partition == partition]
        assert offsets == list(range(len(offsets))), f"partition {partition} not consecutive"


def test_a_polling_consumer_gets_what_another_process_appends_exactly_once(
    log: EmbeddedTaskLog, path: str
) -> None:
    consumer, _ = joined(log, "g")
    foreign = spawn(_PRODUCER, path, "2000", "foreign")
    local = log.producer()

    def produce_here_too() -> None:
        for i in range(1000):
            local.send(b"key-%d" % (i % 7), b"local-%d" % i)
            if i % 100 == 0:
                time.sleep(0.001)  # let the other process's transactions in between ours

    try:
        assert consumer.poll(10, 0.2) == []  # blocked in poll with nothing to read
        assert foreign.stdin is not None
        foreign.stdin.write("go\n")
        foreign.stdin.flush()
        here = threading.Thread(target=produce_here_too)
        here.start()
        records = poll_until([consumer], lambda got: len(got) >= 3000)
        here.join()
        assert line_of(foreign) == "done"
        assert consumer.poll(10, 0.3) == [], "nothing is delivered twice"
    finally:
        foreign.kill()
        foreign.wait()

    assert_exactly_once_in_order(
        records, {b"foreign-%d" % i for i in range(2000)} | {b"local-%d" % i for i in range(1000)}
    )
    consumer.close()


def test_two_producer_processes_get_consecutive_offsets(log: EmbeddedTaskLog, path: str) -> None:
    producers = [spawn(_PRODUCER, path, "3000", tag) for tag in ("a", "b")]
    try:
        for producer in producers:
            assert producer.stdin is not None
            producer.stdin.write("go\n")
            producer.stdin.flush()
        assert [line_of(producer) for producer in producers] == ["done", "done"]
    finally:
        for producer in producers:
            producer.kill()
            producer.wait()

    records: list[LogRecord] = []
    consumer, _ = joined(log, "reader", records=records)
    poll_until([consumer], lambda got: len(got) >= 6000, records=records)
    assert_exactly_once_in_order(
        records, {b"%s-%d" % (t, i) for t in (b"a", b"b") for i in range(3000)}
    )
    assert sum(lag.end for lag in log.describe_group("reader")) == 6000
    consumer.close()


def test_another_process_sees_the_owner_and_the_committed_offsets(
    log: EmbeddedTaskLog, path: str
) -> None:
    producer = log.producer()
    for i in range(10):
        producer.send(b"same", b"%d" % i)
    assert producer.flush(30) == 0
    consumer, _ = joined(log, "g", "the-worker")
    partition = next(lag.partition for lag in log.describe_group("g") if lag.end)
    consumer.commit({partition: 4})

    described = spawn(_DESCRIBE, path)
    lags = {
        p: (committed, end, owner) for p, committed, end, owner in json.loads(line_of(described))
    }
    described.wait(30)

    assert lags[partition] == (4, 10, "the-worker")
    assert all(owner == "the-worker" for _, _, owner in lags.values())
    consumer.close()
    described = spawn(_DESCRIBE, path)
    assert all(owner is None for *_, owner in json.loads(line_of(described))), "it left the group"
    described.wait(30)


def test_a_second_worker_process_in_the_group_is_refused(log: EmbeddedTaskLog, path: str) -> None:
    consumer, _ = joined(log, "g", "first-worker")

    refused = spawn(_MEMBER, path, "g")
    kind, message = json.loads(line_of(refused))
    refused.wait(30)
    other_group = spawn(_MEMBER, path, "another-group")
    joined_other = json.loads(line_of(other_group))
    other_group.communicate("\n", timeout=30)

    assert kind == "ConfigurationError"
    assert f"pid {os.getpid()}" in message and "first-worker" in message
    assert "supports one worker process" in message and "SCHEDULER_LOG=kafka" in message
    assert joined_other == ["joined", sorted(ALL)], "other groups are not affected"
    assert consumer.assignment() == ALL
    consumer.close()


def test_a_killed_workers_member_row_does_not_block_a_restart(
    log: EmbeddedTaskLog, path: str
) -> None:
    killed = spawn(_MEMBER, path, "g")
    assert json.loads(line_of(killed)) == ["joined", sorted(ALL)]
    assert {lag.owner for lag in log.describe_group("g")} == {"other-worker"}
    killed.send_signal(signal.SIGKILL)
    killed.wait(30)

    assert {lag.owner for lag in log.describe_group("g")} == {None}, "a dead process owns nothing"
    consumer, _ = joined(log, "g", "restarted")
    assert {lag.owner for lag in log.describe_group("g")} == {"restarted"}
    consumer.close()


def test_a_member_row_with_an_old_heartbeat_does_not_block(log: EmbeddedTaskLog) -> None:
    """A pid that exists again (reused by an unrelated process) is not enough to count."""
    an_hour_ago = time.time_ns() // 1_000_000 - 3_600_000
    with log.db_lock:
        log.db.execute(
            "INSERT INTO members VALUES ('shared', 'g', 'gone', 'gone-worker', ?, '[0,1,2,3]', ?)",
            (os.getppid(), an_hour_ago),
        )

    consumer = log.consumer("g", client_id="new")
    consumer.subscribe(Recorder())
    poll_until([consumer], lambda _: consumer.assignment() == ALL)
    assert {lag.owner for lag in log.describe_group("g")} == {"new"}
    consumer.close()


def test_a_live_member_of_another_process_is_refused_in_process_too(log: EmbeddedTaskLog) -> None:
    with log.db_lock:
        log.db.execute(
            "INSERT INTO members VALUES ('shared', 'g', 'm', 'parent', ?, '[]', ?)",
            (os.getppid(), time.time_ns() // 1_000_000),
        )

    with pytest.raises(ConfigurationError, match="SCHEDULER_LOG=kafka"):
        log.consumer("g", client_id="c").subscribe(Recorder())


def test_a_killed_process_not_yet_reaped_counts_as_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_alive(child.pid)
        child.send_signal(signal.SIGKILL)
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie now, not reaped

        assert not process_alive(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not process_alive(child.pid)


def test_an_embedded_scheduler_the_group_refuses_fails_at_once_with_the_reason(
    tmp_path: Path,
) -> None:
    """Its worker stops on the refused join; `start` raises that error rather than wait for an
    assignment that cannot come and end in a TimeoutError."""
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.executors.abc import noop_executor

    scheduler = EmbeddedScheduler(data_dir=tmp_path, executor=noop_executor)
    with scheduler.log.db_lock:
        scheduler.log.db.execute(
            "INSERT INTO members VALUES (?, ?, 'm', 'other-worker', ?, '[]', ?)",
            (
                scheduler.log.topic,
                scheduler.worker.group_id,
                os.getppid(),
                time.time_ns() // 1_000_000,
            ),
        )

    with pytest.raises(ConfigurationError, match="other-worker"):
        scheduler.start(wait_for_assignment_s=120)
    assert isinstance(scheduler.worker.fatal_error, ConfigurationError)


def test_the_topic_id_is_the_files_and_changes_when_the_file_is_made_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.db"
    log = EmbeddedTaskLog(path=str(path))
    try:
        log.ensure_topic(2)
        first = log.topic_id()
        assert first is not None and log.topic_id() == first
        for name in os.listdir(tmp_path):  # what `rm -r .scheduler` does under a worker
            os.remove(tmp_path / name)
        with pytest.raises(TopicMissingError, match=f"the embedded log {path} does not exist"):
            log.topic_id()
        other = EmbeddedTaskLog(path=str(path))  # `scheduler enqueue` in another terminal
        other.ensure_topic(2)
        other.close()
        assert log.topic_id() not in (None, first)
    finally:
        log.close()
    in_memory = EmbeddedTaskLog(path=None)
    assert in_memory.topic_id() is None  # one process alone: nothing to check
    in_memory.close()
