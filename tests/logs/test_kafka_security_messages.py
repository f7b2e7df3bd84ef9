"""What a security refusal says, from librdkafka's error text and the client's settings alone
(the same refusals from a real broker are in test_kafka_security.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from scheduler.logs.kafka_security import (
    REFUSAL_HOLDS_S,
    RefusalRecorder,
    certificate_subject,
    login_refusal,
    not_allowed,
    principal,
)
from tests.servers import self_signed_certificate

BOOTSTRAP = "broker-1:9093"


def transport_failure(alert: str) -> KafkaError:
    return KafkaError(
        KafkaError._TRANSPORT,
        f"ssl://{BOOTSTRAP}/bootstrap: Receive failed: error:0A00045C:SSL routines::{alert} "
        "(after 2ms in state APIVERSION_QUERY)",
    )


def test_a_certificate_subject_is_written_as_kafka_names_its_user(tmp_path: Path) -> None:
    certificate, _ = self_signed_certificate(
        tmp_path, '/C=DE/O=Acme, Inc./OU=data\\+eng/CN=spark "jobs";x'
    )
    # RFC 2253, most specific name first, with its escapes: what Java's
    # X500Principal.getName() printed for this certificate, which Kafka's default principal
    # builder uses (checked once by hand with a few lines of Java).
    java_name = 'CN=spark \\"jobs\\"\\;x,OU=data\\+eng,O=Acme\\, Inc.,C=DE'

    assert certificate_subject(str(certificate)) == java_name
    config = {"security.protocol": "SSL", "ssl.certificate.location": str(certificate)}
    assert principal(config) == f"User:{java_name}"


def test_a_certificate_that_cannot_be_read_is_described_not_named(tmp_path: Path) -> None:
    missing = {"security.protocol": "SSL", "ssl.certificate.location": str(tmp_path / "gone.pem")}

    assert certificate_subject(str(tmp_path / "gone.pem")) is None
    assert principal(missing) == "the user of the client certificate (ssl.certificate.location)"
    assert principal({"security.protocol": "SSL"}).startswith("the user of the client certificate")
    # A PKCS#12 keystore is not read (the standard library has no parser for it): named instead.
    keystore = {"security.protocol": "SSL", "ssl.keystore.location": "/etc/kafka/client.p12"}
    assert principal(keystore) == "the user of the client certificate (ssl.keystore.location)"


@pytest.mark.parametrize(
    "alert",
    [
        "ssl/tls alert bad certificate",
        "tlsv13 alert certificate required",
        "tlsv1 alert unknown ca",
    ],
)
def test_a_certificate_alert_without_a_certificate_asks_for_one(alert: str) -> None:
    refusal = login_refusal(transport_failure(alert), BOOTSTRAP, {"security.protocol": "SSL"})

    assert refusal is not None
    assert "requires a client certificate (mutual TLS) and the client sent none" in str(refusal)
    assert "set ssl.certificate.location and ssl.key.location" in str(refusal)


def test_a_certificate_alert_with_a_certificate_names_the_setting_it_came_from() -> None:
    config = {"security.protocol": "SSL", "ssl.keystore.location": "/etc/kafka/client.p12"}

    refusal = login_refusal(
        transport_failure("ssl/tls alert certificate expired"), BOOTSTRAP, config
    )

    assert refusal is not None
    assert "did not accept the client certificate (ssl.keystore.location)" in str(refusal)
    assert "set ssl.keystore.location to a certificate that a CA" in str(refusal)


def test_a_handshake_alert_points_at_the_tls_settings() -> None:
    refusal = login_refusal(transport_failure("ssl/tls alert handshake failure"), BOOTSTRAP, {})

    assert refusal is not None
    assert "refused the TLS connection" in str(refusal)
    assert "TLS versions and cipher suites" in str(refusal)


@pytest.mark.parametrize(
    "error",
    [
        transport_failure("ssl/tls alert internal error"),  # the broker's trouble, maybe passing
        KafkaError(KafkaError._TRANSPORT, f"{BOOTSTRAP}/bootstrap: Connect to ipv4#... failed"),
        KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
    ],
)
def test_other_connection_failures_are_not_refusals(error: KafkaError) -> None:
    assert login_refusal(error, BOOTSTRAP, {"ssl.certificate.location": "/c.pem"}) is None


def test_the_acl_to_grant_quotes_a_principal_a_shell_would_split(tmp_path: Path) -> None:
    certificate, _ = self_signed_certificate(tmp_path, "/O=Acme/CN=spark jobs")
    config = {"security.protocol": "SSL", "ssl.certificate.location": str(certificate)}

    refusal = not_allowed(
        KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed"),
        action="write to topic 't'",
        operation="Write",
        resource="--topic t",
        config=config,
    )

    assert refusal is not None
    assert "--allow-principal 'User:CN=spark jobs,O=Acme' --operation Write --topic t" in str(
        refusal
    )


def test_a_refused_login_is_logged_once_a_minute_per_client_not_per_reconnect() -> None:
    from scheduler.logs.kafka_config import _RepeatsOncePerMinute

    now = [0.0]
    refusals = _RepeatsOncePerMinute(clock=lambda: now[0])

    def line(client: str, after_ms: int) -> logging.LogRecord:
        text = (
            f"FAIL [{client}#consumer-3] [thrd:sasl_ssl://b:9092/bootstrap]: sasl_ssl://b:9092/"
            "bootstrap: SASL authentication error: Authentication failed during authentication "
            f"due to invalid credentials (after {after_ms}ms in state AUTH_REQ)"
        )
        return logging.LogRecord("scheduler.logs.kafka", logging.ERROR, "", 0, text, (), None)

    # A reconnect every ~350 ms: the first line shows, the rest of the minute does not.
    shown = [refusals.filter(line("w1", 300 + i)) for i in range(170)]
    assert shown == [True] + [False] * 169
    assert refusals.filter(line("w2", 301))  # another client's refusal is its own
    now[0] = 60.0
    again = line("w1", 302)
    assert refusals.filter(again)
    assert again.getMessage().endswith("(169 more like it before)")


def test_a_broker_away_is_logged_once_a_minute_per_client_and_address_not_every_50_ms() -> None:
    """With every broker down, librdkafka's consumer connects to its bootstrap address every
    50 ms, an ERROR line each time; lines that are not FAIL lines pass as they come."""
    from scheduler.logs.kafka_config import _RepeatsOncePerMinute

    now = [0.0]
    failures = _RepeatsOncePerMinute(clock=lambda: now[0])

    def line(text: str) -> logging.LogRecord:
        return logging.LogRecord("scheduler.logs.kafka", logging.ERROR, "", 0, text, (), None)

    def away(address: str) -> logging.LogRecord:
        return line(
            f"FAIL [w1#consumer-2] [thrd:{address}]: {address}: Connect to ipv4#127.0.0.1:9092 "
            "failed: Connection refused (after 0ms in state CONNECT)"
        )

    shown = [failures.filter(away("127.0.0.1:9092/bootstrap")) for _ in range(1200)]
    assert shown == [True] + [False] * 1199
    assert failures.filter(away("127.0.0.1:9092/1"))  # another address is its own line
    assert all(failures.filter(line("COMMITFAIL [w1] offsets: Local: timed out")) for _ in range(3))
    now[0] = 61.0
    again = away("127.0.0.1:9092/bootstrap")
    assert failures.filter(again)
    assert again.getMessage().endswith("(1199 more like it before)")


def test_a_partition_without_leader_is_logged_once_a_minute_per_client_and_topic() -> None:
    """While a broker restarts, a producer's every metadata refresh logs each partition
    without a leader: one line a minute per client and topic says it."""
    from scheduler.logs.kafka_config import _RepeatsOncePerMinute

    now = [0.0]
    repeats = _RepeatsOncePerMinute(clock=lambda: now[0])

    def no_leader(client: str, topic: str, partition: int) -> logging.LogRecord:
        text = (
            f"METADATAUPDATE [{client}#producer-2] [thrd:main]: Partition {topic}"
            f"(sJvc/IbjSYq5PTr7956NTA)[{partition}]: new leader-1 not found in cache"
        )
        return logging.LogRecord("scheduler.logs.kafka", logging.WARNING, "", 0, text, (), None)

    shown = [repeats.filter(no_leader("rdkafka", "tasks", p % 8)) for p in range(80)]
    assert shown == [True] + [False] * 79
    assert repeats.filter(no_leader("rdkafka", "other", 0))  # another topic is its own line
    assert repeats.filter(no_leader("w2", "tasks", 0))  # and so is another client
    now[0] = 60.0
    again = no_leader("rdkafka", "tasks", 3)
    assert repeats.filter(again)
    assert again.getMessage().endswith(
        "[3]: new leader-1 not found in cache (79 more like it before)"
    )


def refused_login(during: str = "authentication") -> KafkaError:
    return KafkaError(
        KafkaError._AUTHENTICATION,
        f"sasl_ssl://{BOOTSTRAP}/1: SASL authentication error: Authentication failed during "
        f"{during} due to invalid credentials with SASL mechanism SCRAM-SHA-512",
    )


def test_a_running_clients_refused_login_is_said_once_a_minute_with_what_to_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    recorder = RefusalRecorder(
        BOOTSTRAP,
        {"sasl.username": "u"},
        client="consumer of topic 't'",
        meanwhile="Records wait.",
        clock=lambda: now[0],
    )
    caplog.set_level(logging.ERROR, logger="scheduler.logs.kafka")
    recorder(KafkaError(KafkaError._TRANSPORT, "Connection refused"))  # a broker away: no
    assert recorder.recent() is None and recorder.first is None and not caplog.records

    for second in range(59):  # a reconnect a second, each refused
        now[0] = float(second)
        recorder(refused_login("re-authentication" if second == 0 else "authentication"))
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1
    assert logged[0].startswith(f"consumer of topic 't': Kafka at '{BOOTSTRAP}' refused the login")
    assert "during re-authentication" in logged[0]
    assert "Records wait. To end it, check sasl.username and sasl.password" in logged[0]
    assert "SCHEDULER_KAFKA_CONFIG" in logged[0] and "restart the process" in logged[0]
    assert "Retrying will not help" not in logged[0]  # it does, once the cluster accepts it
    # The first refusal is the one a starting client raises, in the words for stopping.
    assert recorder.first is not None and "Retrying will not help" in str(recorder.first)

    now[0] = 60.0
    recorder(refused_login())
    assert len(caplog.records) == 2  # a minute on: said again
    assert "refused the login" in str(recorder.recent())
    now[0] += REFUSAL_HOLDS_S + 0.1  # no refusal since: the login got through
    assert recorder.recent() is None
    assert len(caplog.records) == 2


def test_a_recorder_without_a_client_name_keeps_refusals_without_logging_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = RefusalRecorder(BOOTSTRAP, {})
    caplog.set_level(logging.DEBUG, logger="scheduler.logs.kafka")
    recorder(refused_login())
    assert recorder.first is not None and recorder.recent() is not None
    assert not caplog.records
