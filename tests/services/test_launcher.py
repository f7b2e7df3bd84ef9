"""The local launcher starts real Kafka and Cassandra servers that clients can use.

These tests share the session's servers with every other test, so none of them leaves a server
stopped: the one restart test brings Kafka back before it returns.
"""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest

from scheduler.services import launcher
from scheduler.services.errors import ServiceError
from scheduler.services.process import require_java17


@pytest.mark.kafka
def test_launched_kafka_round_trips_a_message() -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = launcher.start("kafka").address
    topic = f"launcher-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=b"k", value=b"hello")
    assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        message = None
        while message is None and time.monotonic() < deadline:
            candidate = consumer.poll(1.0)
            if candidate is not None and candidate.error() is None:
                message = candidate
        assert message is not None, "no message consumed within 30 s"
        assert (message.key(), message.value()) == (b"k", b"hello")
        consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()
        admin.delete_topics([topic])


@pytest.mark.cassandra
def test_launched_cassandra_creates_a_keyspace_and_stores_a_row() -> None:
    from cassandra.cluster import Cluster

    status = launcher.start("cassandra")
    host, port = status.address.rsplit(":", 1)
    keyspace = f"launcher_{uuid.uuid4().hex[:8]}"
    cluster = Cluster([host], port=int(port), protocol_version=5)
    try:
        session = cluster.connect()
        session.execute(
            f"CREATE KEYSPACE {keyspace} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        session.execute(f"CREATE TABLE {keyspace}.t (k int PRIMARY KEY, v text)")
        session.execute(f"INSERT INTO {keyspace}.t (k, v) VALUES (1, 'one')")
        assert session.execute(f"SELECT v FROM {keyspace}.t WHERE k = 1").one().v == "one"
        session.execute(f"DROP KEYSPACE {keyspace}")
    finally:
        cluster.shutdown()


@pytest.mark.kafka
@pytest.mark.cassandra
def test_status_reports_both_servers_healthy() -> None:
    launcher.up()
    statuses = {s.name: s for s in (launcher.status(n) for n in launcher.SERVERS)}
    assert statuses["kafka"].healthy, statuses["kafka"].detail
    assert statuses["cassandra"].healthy, statuses["cassandra"].detail
    for name, status in statuses.items():
        assert status.address == launcher.server(name).address


@pytest.mark.kafka
@pytest.mark.cassandra
def test_up_on_running_servers_is_a_quick_no_op() -> None:
    first = launcher.up()
    began = time.monotonic()
    second = launcher.up()
    assert time.monotonic() - began < 10
    assert [s.pid for s in second] == [s.pid for s in first]
    assert all(s.healthy for s in second)


@pytest.mark.kafka
@pytest.mark.slow
def test_restarting_kafka_keeps_its_topics() -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    before = launcher.start("kafka")
    if before.pid is None:
        pytest.fail("Kafka was not started by this launcher's state dir; cannot restart it")
    admin = AdminClient({"bootstrap.servers": before.address})
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    try:
        after = launcher.restart("kafka")
        assert after.healthy
        assert after.pid != before.pid
        topics = AdminClient({"bootstrap.servers": after.address}).list_topics(timeout=30).topics
        assert topic in topics
    finally:
        launcher.start("kafka")  # whatever happened above, leave Kafka running
        AdminClient({"bootstrap.servers": before.address}).delete_topics([topic])


def test_stale_pid_file_is_ignored_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCHEDULER_SERVICES_DIR", str(tmp_path))
    monkeypatch.setenv("SCHEDULER_SERVICES_KAFKA_PORT", "1")  # nothing listens there
    pid_file = tmp_path / "kafka" / "server.pid"
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text("999999\n")  # beyond the default pid_max: never a live process

    status = launcher.status("kafka")

    assert status.pid is None
    assert not status.healthy
    assert not pid_file.exists()
    assert launcher.stop("kafka") is False


def test_a_java_other_than_17_is_refused_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'openjdk version \"21.0.2\" 2024-01-16' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SCHEDULER_SERVICES_JAVA", str(fake))

    with pytest.raises(ServiceError, match=r"Java 21.*need Java 17.*SCHEDULER_SERVICES_JAVA"):
        require_java17()


def test_the_secured_nodes_certificates_chain_to_their_ca_and_are_kept(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from scheduler.services.tls import TlsFiles

    files = TlsFiles(tmp_path / "tls")
    files.make(require_java17())
    openssl = shutil.which("openssl")
    assert openssl is not None
    for cert, purpose in (
        (files.client_cert, "sslclient"),
        (tmp_path / "tls/node.pem", "sslserver"),
    ):
        verified = subprocess.run(
            [openssl, "verify", "-purpose", purpose, "-CAfile", files.ca, cert],
            capture_output=True,
            text=True,
            check=False,
        )
        assert verified.returncode == 0, verified.stderr
    made = {path: path.stat().st_mtime_ns for path in (files.ca, files.node_keystore)}
    files.make(require_java17())  # a second start keeps them: clients hold the CA file
    assert {path: path.stat().st_mtime_ns for path in made} == made


@pytest.mark.cassandra
def test_status_lists_the_secured_node_only_while_it_runs() -> None:
    from click.testing import CliRunner

    from scheduler.cli.main import cli
    from tests.servers import secured_cassandra

    secured_cassandra()  # started for the session (stopped at its end if it started it)
    shown = CliRunner().invoke(cli, ["services", "status"])
    assert "cassandra-secured" in shown.output
    assert "127.0.0.1:9142" in shown.output


def test_status_without_the_secured_servers_certificates_says_what_each_server_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something answers on the secured servers' ports (another state dir's servers; here a
    bare socket), but this state dir never made their certificates: the secured broker's health
    check died of librdkafka's "ssl.ca.location failed", and with it `status`."""
    from click.testing import CliRunner

    from scheduler.cli.main import cli

    monkeypatch.setenv("SCHEDULER_SERVICES_DIR", str(tmp_path))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        taken = str(listener.getsockname()[1])
        for variable, port in {
            "SCHEDULER_SERVICES_KAFKA_PORT": "1",  # nothing listens there
            "SCHEDULER_SERVICES_CASSANDRA_PORT": "1",
            "SCHEDULER_SERVICES_KAFKA_SECURED_PORT": taken,
            "SCHEDULER_SERVICES_CASSANDRA_SECURED_PORT": taken,
        }.items():
            monkeypatch.setenv(variable, port)
        shown = CliRunner().invoke(cli, ["services", "status"])
        secured = [launcher.status(name) for name in launcher.SECURED]

    assert isinstance(shown.exception, SystemExit), shown.exception  # exit 1: servers are down
    assert shown.exit_code == 1
    for name in launcher.SERVERS:
        assert f"nothing listening on 127.0.0.1:1; `scheduler services up {name}` starts it" in (
            shown.output
        )
    for status in secured:  # not started from here: not listed, and not healthy
        assert not status.healthy
        assert status.name not in shown.output
        assert f"not in {tmp_path / status.name / 'tls'}" in status.detail
        assert f"`scheduler services up {status.name}` makes them" in status.detail


def test_down_and_restart_take_server_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`down cassandra` stops Cassandra alone, as the flags did; a state dir that started
    nothing stops nothing and restarts nothing."""
    from click.testing import CliRunner

    from scheduler.cli.main import cli

    monkeypatch.setenv("SCHEDULER_SERVICES_DIR", str(tmp_path))
    monkeypatch.setenv("SCHEDULER_SERVICES_KAFKA_PORT", "1")  # nothing listens there
    runner = CliRunner()

    shown = runner.invoke(cli, ["services", "down", "cassandra", "kafka-secured", "cassandra"])
    assert shown.exit_code == 0, shown.output
    assert [line.split()[0] for line in shown.output.splitlines()] == [
        "cassandra",
        "kafka-secured",
    ]
    assert "was not running" in shown.output

    by_flags = runner.invoke(cli, ["services", "down", "--no-kafka"])
    assert [line.split()[0] for line in by_flags.output.splitlines()] == [
        "cassandra",
        "kafka-secured",
        "cassandra-secured",
    ]

    unknown = runner.invoke(cli, ["services", "down", "zookeeper"])
    assert unknown.exit_code == 2
    assert "'zookeeper' is not one of 'kafka', 'cassandra'" in unknown.output

    nothing = runner.invoke(cli, ["services", "restart"])
    assert nothing.exit_code == 2 and "Missing argument" in nothing.output
