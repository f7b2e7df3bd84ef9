"""The CLI on a secured Kafka (TLS, a SCRAM login, ACLs), as docs/kafka.md tells an operator to
set it up: the topic made by an admin, the scheduler's user allowed only the ACLs listed there.
And `kafka-tool`, which hands the same security settings to Kafka's Java tools."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

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


def documented_acls(topic: str, group: str) -> tuple[tuple[str, str, str], ...]:
    """The ACLs docs/kafka.md lists for a worker that also enqueues, on an existing topic."""
    return (
        *(("topic", topic, op) for op in ("Describe", "Read", "Write")),
        *(("group", group, op) for op in ("Read", "Describe")),
    )


def log_in(monkeypatch: pytest.MonkeyPatch, bootstrap: str, login: dict[str, str]) -> None:
    """Have the next commands connect to `bootstrap` with `login` (librdkafka settings)."""
    monkeypatch.setenv("SCHEDULER_KAFKA_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("SCHEDULER_KAFKA_CONFIG", ",".join(f"{k}={v}" for k, v in login.items()))


@pytest.fixture
def topic_on_the_secured_broker(
    script, kafka_with_sqlite, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, str, str]:
    """The secured broker, and the test's topic and group names: the topic made by the broker's
    admin (`scheduler topic create`), as docs/kafka.md has an operator do. The store is SQLite:
    these tests are about Kafka."""
    from tests.servers import secured_kafka

    broker = secured_kafka()
    log_in(monkeypatch, broker.bootstrap, broker.login(*broker.admin))
    created = script("topic", "create")
    assert created.returncode == 0, created.stderr
    return broker, kafka_with_sqlite["SCHEDULER_TOPIC"], kafka_with_sqlite["SCHEDULER_GROUP_ID"]


def kafka_tool_describes_the_group(script, group: str, topic: str) -> None:
    described = script(
        "services", "kafka-tool", "consumer-groups", "--describe", "--group", group, timeout=120
    )
    assert described.returncode == 0, described.stderr
    assert topic in described.stdout


def runs_a_task(script, ordering_id: str, running: subprocess.Popen[str]) -> None:
    """Enqueue a task due in a second, with the settings in effect, and wait until the `running`
    worker has run it; if it does not, stop the worker and fail with what it said."""
    enqueued = script("enqueue", ordering_id, "--in", "1s", "--key", "k1")
    assert enqueued.returncode == 0, enqueued.stderr

    def states() -> list[str]:
        listed = script("tasks", "list", "--ordering-id", ordering_id, "--json")
        if listed.returncode != 0:  # the worker has not made its store yet
            return [listed.stderr]
        return [row["state"] for row in json.loads(listed.stdout)]

    if not wait_for(lambda: states() == ["succeeded"]):
        running.terminate()
        _, said = running.communicate(timeout=60)
        raise AssertionError(f"the task is {states()}; the worker said:\n{said[-4000:]}")


@pytest.mark.kafka
@pytest.mark.slow
def test_a_worker_runs_tasks_as_a_user_with_only_the_documented_acls(
    script, worker, monkeypatch, topic_on_the_secured_broker
) -> None:
    from tests.servers import secured_kafka_user

    broker, topic, group = topic_on_the_secured_broker

    log_in(
        monkeypatch,
        broker.bootstrap,
        secured_kafka_user(*documented_acls(topic, group)),
    )
    checked = script("topic", "create")  # without Create: it only checks the existing topic
    assert checked.returncode == 0, checked.stderr
    running = worker()
    runs_a_task(script, "secured-k", running)

    status = script("group", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert {row["owner"] for row in json.loads(status.stdout)} != {None}

    # Kafka's own tool logs in with the same settings, translated for the Java client.
    kafka_tool_describes_the_group(script, group, topic)

    running.terminate()
    assert running.wait(timeout=60) == 0


@pytest.mark.kafka
@pytest.mark.slow
def test_a_worker_whose_login_is_refused_while_running_says_what_to_change_and_loses_nothing(
    script, worker, monkeypatch, topic_on_the_secured_broker
) -> None:
    """The user's credential is deleted under a running worker (the secured broker asks for a
    new login every 10 s, as clusters with connections.max.reauth.ms do): the worker says once
    what to change, its probes pass and name the problem, and a task enqueued meanwhile by
    another user runs once the login is accepted again."""
    from tests.http import free_port, probe
    from tests.servers import secured_kafka_user, set_kafka_password

    broker, topic, group = topic_on_the_secured_broker
    login = secured_kafka_user(*documented_acls(topic, group))
    user, password = login["sasl.username"], login["sasl.password"]
    log_in(monkeypatch, broker.bootstrap, login)
    port = free_port()
    monkeypatch.setenv("SCHEDULER_METRICS_PORT", str(port))
    running = worker()
    runs_a_task(script, "before", running)

    def problem() -> str:
        answered = probe(port, "/readyz")
        return "" if answered is None else str(answered[1].get("problem") or "")

    set_kafka_password(user, None)
    assert "refused the login" in wait_for(problem, timeout=30)
    status, body = probe(port, "/readyz") or (0, {})
    assert (status, body.get("state")) == (200, "running"), body  # no restart would help

    log_in(monkeypatch, broker.bootstrap, broker.login(*broker.admin))
    enqueued = script("enqueue", "during", "--in", "1s", "--key", "k1")
    assert enqueued.returncode == 0, enqueued.stderr
    set_kafka_password(user, password)

    def state_of_during() -> list[str]:
        listed = script("tasks", "list", "--ordering-id", "during", "--json")
        return [row["state"] for row in json.loads(listed.stdout)] if not listed.returncode else []

    # Until it is final: listed as pending once stored, the task runs a second later.
    assert wait_for(lambda: state_of_during() == ["succeeded"]), state_of_during()
    running.terminate()
    _, stderr = running.communicate(timeout=60)
    said = [line for line in stderr.splitlines() if "consumer of topic" in line]
    assert len(said) == 1, said  # once a minute, not once a reconnect
    assert f"Kafka at {broker.bootstrap!r} refused the login" in said[0]
    assert "check sasl.username and sasl.password" in said[0]
    assert "SCHEDULER_KAFKA_CONFIG" in said[0] and "records wait in the topic" in said[0]


@pytest.mark.kafka
@pytest.mark.slow
def test_a_worker_logs_in_with_a_client_certificate(
    script, worker, monkeypatch, topic_on_the_secured_broker
) -> None:
    from scheduler.services.kafka import CERT_PRINCIPAL
    from tests.servers import grant_kafka_acls, revoke_kafka_acls

    broker, topic, group = topic_on_the_secured_broker
    user = CERT_PRINCIPAL.removeprefix("User:")
    acls = documented_acls(topic, group)
    grant_kafka_acls(user, *acls)
    try:
        log_in(monkeypatch, broker.certificate_bootstrap, broker.certificate_login)
        running = worker()
        runs_a_task(script, "by-cert", running)

        # Kafka's own tool logs in with the certificate too (translated into a PEM keystore).
        kafka_tool_describes_the_group(script, group, topic)

        running.terminate()
        assert running.wait(timeout=60) == 0
    finally:
        revoke_kafka_acls(user, *acls)


@pytest.mark.kafka
def test_a_worker_outside_its_groups_acls_stops_at_once_naming_the_acl(
    script, kafka_with_sqlite, monkeypatch
) -> None:
    from tests.servers import secured_kafka, secured_kafka_user

    broker = secured_kafka()
    topic, group = kafka_with_sqlite["SCHEDULER_TOPIC"], kafka_with_sqlite["SCHEDULER_GROUP_ID"]
    login = secured_kafka_user(
        *(("topic", topic, op) for op in ("Create", "Describe", "Read", "Write"))
    )
    log_in(monkeypatch, broker.bootstrap, login)

    result = script("worker", timeout=60)

    assert result.returncode == 2, result.stderr
    assert f"to join consumer group {group!r}" in result.stderr
    assert f"--operation Read --group {group}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.kafka
def test_a_pkcs12_keystore_logs_in_the_scheduler_and_kafkas_tools(
    script, monkeypatch, topic_on_the_secured_broker, tmp_path: Path
) -> None:
    import subprocess

    from scheduler.services.kafka import CERT_PRINCIPAL
    from tests.servers import grant_kafka_acls, revoke_kafka_acls

    broker, topic, _ = topic_on_the_secured_broker
    keystore = tmp_path / "client.p12"
    pem = broker.certificate_login
    export = ["openssl", "pkcs12", "-export", "-passout", "pass:keystore-secret"]
    files = ["-in", pem["ssl.certificate.location"], "-inkey", pem["ssl.key.location"]]
    subprocess.run([*export, *files, "-out", str(keystore)], check=True, capture_output=True)
    log_in(
        monkeypatch,
        broker.certificate_bootstrap,
        {
            "security.protocol": "SSL",
            "ssl.ca.location": pem["ssl.ca.location"],
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": "keystore-secret",
        },
    )

    # Logged in (no ACL yet): the topic is hidden from it, so enqueue would create it, and the
    # refusal names the certificate's setting and says that the topic may just be hidden.
    refused = script("enqueue", "p12", "--in", "1h")
    assert refused.returncode == 2, refused.stderr
    assert "did not allow the user of the client certificate (ssl.keystore.location)" in (
        refused.stderr
    )
    assert "If it exists already, this user may not Describe it" in refused.stderr

    # Kafka's Java tool logs in with the keystore as the same user: it sees the topic once that
    # user may describe it.
    user = CERT_PRINCIPAL.removeprefix("User:")
    grant_kafka_acls(user, ("topic", topic, "Describe"))
    try:
        listed = script("services", "kafka-tool", "topics", "--list", timeout=120)
    finally:
        revoke_kafka_acls(user, ("topic", topic, "Describe"))
    assert listed.returncode == 0, listed.stderr
    assert topic in listed.stdout.split()


@pytest.mark.kafka
def test_kafka_configs_adds_and_deletes_a_login_as_the_password_rotation_recipe_does(
    script, monkeypatch
) -> None:
    """docs/kafka.md rotates a password through a second user made and removed with
    kafka-configs; the tool runs on the broker's jars, logged in as the scheduler's admin."""
    from uuid import uuid4

    from confluent_kafka.admin import AdminClient

    from tests.servers import secured_kafka

    broker = secured_kafka()
    log_in(monkeypatch, broker.bootstrap, broker.login(*broker.admin))
    user, password = f"second-{uuid4().hex[:10]}", f"pw-{uuid4().hex}"
    users = ("--entity-type", "users", "--entity-name", user)

    def logs_in() -> bool:
        login = broker.login(user, password)
        client = AdminClient({"bootstrap.servers": broker.bootstrap, **login})
        try:
            client.list_topics(timeout=3)
            return True
        except Exception:
            return False

    added = script(
        "services", "kafka-tool", "configs", "--alter",
        "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={password}]", *users,
        timeout=120,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    described = script("services", "kafka-tool", "configs", "--describe", *users, timeout=120)
    assert described.returncode == 0, described.stderr
    assert "SCRAM-SHA-512=iterations=4096" in described.stdout
    assert wait_for(logs_in, timeout=15)

    deleted = script(
        "services", "kafka-tool", "configs", "--alter", "--delete-config", "SCRAM-SHA-512",
        *users, timeout=120,
    )  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    assert wait_for(lambda: not logs_in(), timeout=15)
