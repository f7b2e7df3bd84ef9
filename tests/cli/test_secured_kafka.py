"""The CLI on a secured Kafka (TLS, a SCRAM login, ACLs), as docs/kafka.md tells an operator to
set it up: the topic made by an admin, the scheduler's user allowed only the ACLs listed there.
And `kafka-tool`, which hands the same security settings to Kafka's Java tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.services.kafka_tools import client_properties, write_client_properties
from tests.cli.helpers import wait_for


def test_librdkafka_security_settings_become_the_java_clients(tmp_path: Path) -> None:
    certificate, key = tmp_path / "client.pem", tmp_path / "client.key"
    certificate.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")
    props, untranslated = client_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "app",
            "sasl.password": 'se"cr\\et',
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.certificate.location": str(certificate),
            "ssl.key.location": str(key),
            "ssl.endpoint.identification.algorithm": "none",
            "linger.ms": "10",  # not about security: no concern of a tool
        }
    )
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="app" password="se\\"cr\\\\et";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ca.pem",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": certificate.read_text(),
        "ssl.keystore.key": key.read_text(),
        "ssl.endpoint.identification.algorithm": "",
    }
    assert untranslated == []

    plain, _ = client_properties({"sasl.mechanisms": "PLAIN", "sasl.username": "u"})
    assert plain["sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
    )
    _, kerberos = client_properties(
        {"sasl.mechanism": "GSSAPI", "sasl.kerberos.keytab": "/k", "sasl.username": "u"}
    )
    assert kerberos == ["sasl.kerberos.keytab", "sasl.username"]


def test_the_properties_file_reads_back_as_written_and_only_its_owner_may_read_it(
    tmp_path: Path,
) -> None:
    value = "-----BEGIN X-----\nab\\c\n-----END X-----\n"
    written = write_client_properties({"ssl.keystore.key": value, "k": " lead"}, tmp_path)
    assert written.stat().st_mode & 0o777 == 0o600
    # java.util.Properties' escapes, undone as it undoes them.
    lines = [line for line in written.read_text().splitlines() if not line.startswith("#")]
    read = dict(line.split("=", 1) for line in lines)
    unescape = {"\\n": "\n", "\\r": "\r", "\\\\": "\\", "\\ ": " "}

    def undone(text: str) -> str:
        out, i = "", 0
        while i < len(text):
            pair = text[i : i + 2]
            if pair in unescape:
                out, i = out + unescape[pair], i + 2
            else:
                out, i = out + text[i], i + 1
        return out

    assert {k: undone(v) for k, v in read.items()} == {"ssl.keystore.key": value, "k": " lead"}


@pytest.mark.kafka
@pytest.mark.slow
def test_a_worker_runs_tasks_as_a_user_with_only_the_documented_acls(
    script, worker, distributed, monkeypatch
) -> None:
    from tests.servers import secured_kafka, secured_kafka_user

    broker = secured_kafka()
    topic, group = distributed["SCHEDULER_TOPIC"], distributed["SCHEDULER_GROUP_ID"]
    monkeypatch.setenv("SCHEDULER_STORE", "sqlite")
    monkeypatch.setenv("SCHEDULER_KAFKA_BOOTSTRAP", broker.bootstrap)

    def as_user(login: dict[str, str]) -> None:
        monkeypatch.setenv("SCHEDULER_KAFKA_CONFIG", ",".join(f"{k}={v}" for k, v in login.items()))

    # The operator makes the topic, as its admin.
    as_user(broker.login(*broker.admin))
    created = script("topic", "create")
    assert created.returncode == 0, created.stderr

    as_user(
        secured_kafka_user(
            *(("topic", topic, op) for op in ("Describe", "Read", "Write")),
            *(("group", group, op) for op in ("Read", "Describe")),
        )
    )
    checked = script("topic", "create")  # without Create: it only checks the existing topic
    assert checked.returncode == 0, checked.stderr
    enqueued = script("enqueue", "secured-k", "--in", "1s", "--key", "k1")
    assert enqueued.returncode == 0, enqueued.stderr
    running = worker()

    def states() -> list[str]:
        listed = script("tasks", "list", "--ordering-id", "secured-k", "--json")
        if listed.returncode != 0:  # the worker has not made its store yet
            return [listed.stderr]
        return [row["state"] for row in json.loads(listed.stdout)]

    assert wait_for(lambda: states() == ["succeeded"]), states()

    status = script("group", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert {row["owner"] for row in json.loads(status.stdout)} != {None}

    # Kafka's own tool logs in with the same settings, translated for the Java client.
    described = script(
        "services", "kafka-tool", "consumer-groups", "--describe", "--group", group, timeout=120
    )
    assert described.returncode == 0, described.stderr
    assert topic in described.stdout

    running.terminate()
    assert running.wait(timeout=60) == 0


@pytest.mark.kafka
def test_a_worker_outside_its_groups_acls_stops_at_once_naming_the_acl(
    script, distributed, monkeypatch
) -> None:
    from tests.servers import secured_kafka, secured_kafka_user

    broker = secured_kafka()
    topic, group = distributed["SCHEDULER_TOPIC"], distributed["SCHEDULER_GROUP_ID"]
    monkeypatch.setenv("SCHEDULER_STORE", "sqlite")
    monkeypatch.setenv("SCHEDULER_KAFKA_BOOTSTRAP", broker.bootstrap)
    login = secured_kafka_user(
        *(("topic", topic, op) for op in ("Create", "Describe", "Read", "Write"))
    )
    monkeypatch.setenv("SCHEDULER_KAFKA_CONFIG", ",".join(f"{k}={v}" for k, v in login.items()))

    result = script("worker", timeout=60)

    assert result.returncode == 2, result.stderr
    assert f"to join consumer group {group!r}" in result.stderr
    assert f"--operation Read --group {group}" in result.stderr
    assert "Traceback" not in result.stderr
