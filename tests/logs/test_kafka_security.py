"""Logging in, TLS and ACLs against a real secured broker: what each wrong setting looks like.

The secured broker (tests/servers.py) logs users in with SCRAM-SHA-512 over TLS (SASL_SSL), or
by their client certificate on a second listener (SSL, mutual TLS), and refuses whatever no
ACL allows. A refusal that retrying cannot fix must stop the client at
once with a `ConfigurationError` that names the setting to fix or the ACL to grant, instead of
waiting out the request timeout and blaming the network. The task-log contract itself runs over
this broker too, as a user with only the documented ACLs (tests/contracts, `kafka-secured`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.errors import BackendUnavailableError, ConfigurationError
from scheduler.logs.kafka import KafkaTaskLog
from scheduler.services.kafka import CERT_PRINCIPAL
from tests.servers import (
    SecuredBroker,
    grant_kafka_acls,
    revoke_kafka_acls,
    secured_kafka,
    secured_kafka_user,
    self_signed_certificate,
    set_kafka_password,
)

pytestmark = pytest.mark.kafka

PARTITIONS = 2


@pytest.fixture(scope="module")
def broker() -> SecuredBroker:
    return secured_kafka()


@pytest.fixture
def topic(broker: SecuredBroker) -> Iterator[str]:
    """A topic the broker's admin made, as an operator does before the scheduler starts."""
    name = f"sec-{uuid.uuid4().hex[:10]}"
    admin = KafkaTaskLog(
        bootstrap_servers=broker.bootstrap,
        topic=name,
        producer_config=broker.login(*broker.admin),
    )
    admin.ensure_topic(PARTITIONS)
    yield name
    admin.delete_topic()
    admin.close()


def task_log(
    broker: SecuredBroker, topic: str, login: dict[str, str], client_id: str | None = None
) -> KafkaTaskLog:
    """`client_id` names the admin client and the producers (a consumer's is its worker's)."""
    return KafkaTaskLog(
        bootstrap_servers=broker.bootstrap,
        topic=topic,
        producer_config={**login, "client.id": client_id} if client_id else login,
        consumer_config=login,
        request_timeout_s=5,
    )


def refused_at_start(
    broker: SecuredBroker, caplog: pytest.LogCaptureFixture, **login: Any
) -> tuple[str, float]:
    """Build a log with `login`; the refusal's message and how long it took."""
    caplog.set_level(logging.DEBUG, logger="scheduler.logs.kafka")
    # librdkafka names a client's lines by its client.id: a client another test left open may
    # log meanwhile.
    client_id = f"refused-{uuid.uuid4().hex[:8]}"
    began = time.monotonic()
    with pytest.raises(ConfigurationError) as raised:
        task_log(broker, "any", {**broker.login(*broker.admin), **login}, client_id)
    took = time.monotonic() - began
    # One error that says what to fix, not librdkafka's line per reconnect.
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert [line[:100] for line in lines if f"[{client_id}#" in line] == []
    return str(raised.value), took


def test_a_wrong_password_is_refused_at_once_naming_the_settings(
    broker: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> None:
    message, took = refused_at_start(broker, caplog, **{"sasl.password": "not-it"})

    assert took < 4  # the request timeout is 5 s: the refusal did not wait it out
    assert "refused the login" in message
    assert "invalid credentials" in message  # librdkafka's words
    assert "sasl.username and sasl.password" in message
    assert "SCHEDULER_KAFKA_CONFIG" in message
    assert "Retrying will not help" in message


def test_a_mechanism_the_brokers_do_not_offer_is_refused_naming_theirs(
    broker: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> None:
    message, _ = refused_at_start(broker, caplog, **{"sasl.mechanism": "SCRAM-SHA-256"})

    assert "supported mechanisms: SCRAM-SHA-512" in message
    assert "set sasl.mechanism" in message


def test_an_untrusted_broker_certificate_is_refused_naming_the_ca_setting(
    broker: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> None:
    # The system's CAs do not include the broker's private one.
    message, took = refused_at_start(broker, caplog, **{"ssl.ca.location": "probe"})

    assert took < 4
    assert "refused the TLS connection" in message
    assert "certificate verify failed" in message
    assert "set ssl.ca.location" in message


def test_a_plaintext_client_on_the_tls_listener_is_told_it_may_want_tls(
    broker: SecuredBroker,
) -> None:
    # Not a refusal the brokers name: the listener hangs up. The same happens while a broker
    # restarts, so this stays "unavailable" (retried by workers), with the likely cause.
    with pytest.raises(BackendUnavailableError) as raised:
        KafkaTaskLog(bootstrap_servers=broker.bootstrap, topic="any", request_timeout_s=2)

    message = str(raised.value)
    assert "in state APIVERSION_QUERY" in message
    assert "its listener may want TLS or a login" in message


def test_a_user_with_the_documented_acls_uses_a_topic_it_may_not_create(
    broker: SecuredBroker, topic: str
) -> None:
    login = secured_kafka_user(
        *(("topic", topic, op) for op in ("Describe", "Read", "Write")),
    )
    log = task_log(broker, topic, login)
    try:
        # A create request for an existing topic is refused without Create; a worker's start
        # asks only when the topic is missing.
        assert log.ensure_topic(PARTITIONS) == PARTITIONS
        producer = log.producer()
        assert producer.send(b"k", b"v").result(10) >= 0
        producer.close()
    finally:
        log.close()


def test_a_missing_topic_the_user_may_not_create_names_the_acl_and_the_way_around(
    broker: SecuredBroker,
) -> None:
    name = f"sec-{uuid.uuid4().hex[:10]}"
    login = secured_kafka_user(("topic", name, "Describe"))
    log = task_log(broker, name, login)
    with pytest.raises(ConfigurationError) as raised:
        log.ensure_topic(PARTITIONS)
    log.close()

    message = str(raised.value)
    user = login["sasl.username"]
    assert f"did not allow User:{user} to create topic {name!r}" in message
    assert f"--allow-principal User:{user} --operation Create --topic {name}" in message
    assert "`scheduler topic create` with an admin's settings" in message


def test_a_producer_without_write_fails_its_records_naming_the_acl(
    broker: SecuredBroker, topic: str
) -> None:
    login = secured_kafka_user(("topic", topic, "Describe"))
    log = task_log(broker, topic, login)
    producer = log.producer()
    try:
        # Without Write on any topic the idempotent producer gets no producer id, a fatal error
        # that may come before the send (which then raises) or after it (the future fails).
        with pytest.raises(ConfigurationError) as raised:
            producer.send(b"k", b"v").result(10)
        with pytest.raises(ConfigurationError):
            producer.send(b"k", b"v").result(10)  # and so are the records after it
    finally:
        producer.close()
        log.close()

    assert f"--operation Write --topic {topic}" in str(raised.value)


def test_a_producer_allowed_to_write_elsewhere_only_fails_its_records_naming_the_acl(
    broker: SecuredBroker, topic: str
) -> None:
    # Write on another topic gets it a producer id; this topic's records are refused one by one.
    login = secured_kafka_user(("topic", topic, "Describe"), ("topic", "elsewhere-*", "Write"))
    log = task_log(broker, topic, login)
    producer = log.producer()
    try:
        future = producer.send(b"k", b"v")
        with pytest.raises(ConfigurationError) as raised:
            future.result(10)
    finally:
        producer.close()
        log.close()

    assert "Topic authorization failed" in str(raised.value)
    assert f"--operation Write --topic {topic}" in str(raised.value)


def test_a_consumer_outside_its_groups_acls_stops_naming_the_group_acl(
    broker: SecuredBroker, topic: str
) -> None:
    login = secured_kafka_user(*(("topic", topic, op) for op in ("Describe", "Read")))
    log = task_log(broker, topic, login)
    consumer = log.consumer("sec-group", client_id="c1")

    class Listener:
        def on_assigned(self, partitions: list[int]) -> None: ...
        def on_revoked(self, partitions: list[int]) -> None: ...
        def on_lost(self, partitions: list[int]) -> None: ...

    consumer.subscribe(Listener())
    try:
        with pytest.raises(ConfigurationError) as raised:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                consumer.poll(10, timeout=0.2)
    finally:
        consumer.close()
        log.close()

    message = str(raised.value)
    assert "to join consumer group 'sec-group'" in message
    assert "--operation Read --group sec-group" in message


class Assigned:
    """A rebalance listener that notes that the group assigned the consumer partitions."""

    def __init__(self) -> None:
        self.partitions: set[int] = set()

    def on_assigned(self, partitions: list[int]) -> None:
        self.partitions |= set(partitions)

    def on_revoked(self, partitions: list[int]) -> None:
        self.partitions -= set(partitions)

    def on_lost(self, partitions: list[int]) -> None:
        self.partitions -= set(partitions)


def refused_reads(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "--operation Read" in r.getMessage()]


def test_an_acl_revoked_from_a_running_consumer_is_logged_and_it_reads_on_once_granted(
    broker: SecuredBroker, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    reading = ("topic", topic, "Read")
    login = secured_kafka_user(
        ("topic", topic, "Describe"),
        reading,
        ("group", "sec-g", "Read"),
        ("group", "sec-g", "Describe"),
    )
    user = login["sasl.username"]
    log = task_log(broker, topic, login)
    consumer = log.consumer("sec-g", client_id="c1")
    listener = Assigned()
    consumer.subscribe(listener)
    writer = task_log(broker, topic, broker.login(*broker.admin)).producer()
    try:
        deadline = time.monotonic() + 30
        while listener.partitions != set(range(PARTITIONS)) and time.monotonic() < deadline:
            consumer.poll(10, timeout=0.2)
        assert listener.partitions == set(range(PARTITIONS))

        caplog.set_level(logging.ERROR, logger="scheduler.logs.kafka")
        revoke_kafka_acls(user, reading)
        # A fetch the broker authorized before the revocation waits in its purgatory and
        # would return a record written now: write only once a fetch has been refused.
        records = []
        deadline = time.monotonic() + 30
        while not refused_reads(caplog) and time.monotonic() < deadline:
            records += consumer.poll(10, timeout=0.2)
        assert records == []
        writer.send(b"k", b"while revoked").result(10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # no raise: the refusal is retried
            records += consumer.poll(10, timeout=0.2)
        assert records == []
        refusals = refused_reads(caplog)
        assert len(refusals) == 1, refusals  # once a minute, not once a poll
        assert f"--operation Read --topic {topic}" in refusals[0]

        grant_kafka_acls(user, reading)
        deadline = time.monotonic() + 30
        while not records and time.monotonic() < deadline:
            records += consumer.poll(10, timeout=0.2)
        assert [r.value for r in records] == [b"while revoked"]
    finally:
        writer.close()
        consumer.close()
        log.close()


def test_a_login_refused_while_running_is_said_with_what_to_change_and_nothing_is_lost(
    broker: SecuredBroker, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The secured broker asks every client to log in again within 10 s (REAUTH_MS), as a
    # cluster with connections.max.reauth.ms does: a deleted user is refused at that login.
    login = secured_kafka_user(
        ("topic", topic, "Describe"),
        ("topic", topic, "Read"),
        ("topic", topic, "Write"),
        ("group", "sec-r", "Read"),
        ("group", "sec-r", "Describe"),
    )
    user, password = login["sasl.username"], login["sasl.password"]
    log = KafkaTaskLog(
        bootstrap_servers=broker.bootstrap,
        topic=topic,
        producer_config={**login, "message.timeout.ms": "5000"},
        consumer_config=login,
        request_timeout_s=5,
    )
    consumer = log.consumer("sec-r", client_id="c1")
    listener = Assigned()
    consumer.subscribe(listener)
    producer = log.producer()
    writer = task_log(broker, topic, broker.login(*broker.admin)).producer()
    caplog.set_level(logging.ERROR, logger="scheduler.logs.kafka")

    def said(client: str) -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.getMessage().startswith(f"{client} of topic {topic!r}: ")
        ]

    try:
        deadline = time.monotonic() + 30
        while listener.partitions != set(range(PARTITIONS)) and time.monotonic() < deadline:
            consumer.poll(10, timeout=0.2)
        assert listener.partitions == set(range(PARTITIONS))
        assert producer.send(b"k", b"before").result(10) in range(PARTITIONS)
        assert consumer.problem() is None

        set_kafka_password(user, None)
        deadline = time.monotonic() + 30  # the next login comes within REAUTH_MS
        records = []
        while not (said("consumer") and said("producer")) and time.monotonic() < deadline:
            records += consumer.poll(10, timeout=0.2)
            producer.flush(0)  # serves the producer's callbacks, as its own thread does
        problem = consumer.problem()
        assert problem is not None and "refused the login" in problem

        # Each client says it once, in the scheduler's words: what waits, and what to change.
        [consumer_said], [producer_said] = said("consumer"), said("producer")
        for message in (consumer_said, producer_said):
            assert f"Kafka at {broker.bootstrap!r} refused the login" in message
            assert "check sasl.username and sasl.password" in message
            assert "SCHEDULER_KAFKA_CONFIG" in message
        assert "records wait in the topic" in consumer_said
        assert "message.timeout.ms" in producer_said

        # A record of this producer fails once it has waited, saying why; another producer's
        # record waits in the topic for the consumer to read once it may log in again.
        refused = producer.send(b"k", b"refused")
        with pytest.raises(BackendUnavailableError, match="refused the login"):
            refused.result(30)
        writer.send(b"k", b"while refused").result(10)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            records += consumer.poll(10, timeout=0.2)
        assert [r.value for r in records] in ([], [b"before"])  # read before the next login
        assert len(said("consumer")) == 1  # once a minute, not once a reconnect

        set_kafka_password(user, password)
        deadline = time.monotonic() + 30
        while b"while refused" not in [r.value for r in records] and time.monotonic() < deadline:
            records += consumer.poll(10, timeout=0.2)
        assert [r.value for r in records][-1:] == [b"while refused"]
        assert producer.send(b"k", b"after").result(10) in range(PARTITIONS)
    finally:
        writer.close()
        producer.close()
        consumer.close()
        log.close()


def test_reading_the_groups_offsets_without_describe_names_the_acl(
    broker: SecuredBroker, topic: str
) -> None:
    login = secured_kafka_user(*(("topic", topic, op) for op in ("Describe", "Read")))
    log = task_log(broker, topic, login)
    try:
        with pytest.raises(ConfigurationError) as raised:
            log.describe_group("sec-group")
    finally:
        log.close()

    assert "--operation Describe --group sec-group" in str(raised.value)


# -- mutual TLS: the listener that logs clients in by their certificate ----------------------


def certificate_log(broker: SecuredBroker, topic: str, **login: str) -> KafkaTaskLog:
    return KafkaTaskLog(
        bootstrap_servers=broker.certificate_bootstrap,
        topic=topic,
        producer_config={**broker.certificate_login, **login},
        request_timeout_s=5,
    )


def refused_on_certificate(broker: SecuredBroker, **login: str) -> tuple[str, float]:
    began = time.monotonic()
    with pytest.raises(ConfigurationError) as raised:
        certificate_log(broker, "any", **login)
    return str(raised.value), time.monotonic() - began


def test_a_client_without_a_certificate_is_told_the_listener_wants_one(
    broker: SecuredBroker,
) -> None:
    without = {
        k: v
        for k, v in broker.certificate_login.items()
        if not k.startswith(("ssl.cert", "ssl.key"))
    }
    with pytest.raises(ConfigurationError) as raised:
        KafkaTaskLog(
            bootstrap_servers=broker.certificate_bootstrap,
            topic="any",
            producer_config=without,
            request_timeout_s=5,
        )

    message = str(raised.value)
    assert "requires a client certificate (mutual TLS) and the client sent none" in message
    assert "alert" in message  # librdkafka's words, for a search
    assert "set ssl.certificate.location and ssl.key.location" in message


def test_a_certificate_the_brokers_do_not_trust_is_refused_naming_its_subject(
    broker: SecuredBroker, tmp_path: Path
) -> None:
    certificate, key = self_signed_certificate(tmp_path, "/O=Elsewhere/CN=stranger")

    message, took = refused_on_certificate(
        broker, **{"ssl.certificate.location": str(certificate), "ssl.key.location": str(key)}
    )

    assert took < 4  # the request timeout is 5 s: the refusal did not wait it out
    assert "did not accept the client certificate CN=stranger,O=Elsewhere" in message
    assert "a CA in the brokers' truststore signed" in message
    assert "Retrying will not help" in message


def test_a_certificate_login_is_named_by_its_subject_in_the_acl_to_grant(
    broker: SecuredBroker,
) -> None:
    name = f"sec-{uuid.uuid4().hex[:10]}"
    log = certificate_log(broker, name)
    try:
        with pytest.raises(ConfigurationError) as raised:
            log.ensure_topic(PARTITIONS)
    finally:
        log.close()

    message = str(raised.value)
    assert f"did not allow {CERT_PRINCIPAL} to create topic {name!r}" in message
    assert f"--allow-principal {CERT_PRINCIPAL} --operation Create --topic {name}" in message


def test_a_certificate_login_with_its_acls_sends_and_reads_records(
    broker: SecuredBroker, topic: str
) -> None:
    user, group = CERT_PRINCIPAL.removeprefix("User:"), f"{topic}-g"
    acls = (
        *(("topic", topic, op) for op in ("Describe", "Read", "Write")),
        *(("group", group, op) for op in ("Describe", "Read")),
    )
    grant_kafka_acls(user, *acls)
    log = KafkaTaskLog(
        bootstrap_servers=broker.certificate_bootstrap,
        topic=topic,
        producer_config=broker.certificate_login,
        consumer_config=broker.certificate_login,
        request_timeout_s=5,
    )
    consumer = log.consumer(group, client_id="c1")
    consumer.subscribe(Assigned())
    try:
        producer = log.producer()
        producer.send(b"k", b"by certificate").result(10)
        producer.close()
        records = []
        deadline = time.monotonic() + 30
        while not records and time.monotonic() < deadline:
            records += consumer.poll(10, timeout=0.2)
        assert [r.value for r in records] == [b"by certificate"]
    finally:
        consumer.close()
        log.close()
        revoke_kafka_acls(user, *acls)
