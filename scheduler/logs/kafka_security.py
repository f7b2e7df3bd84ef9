"""What a secured Kafka cluster's refusals mean, said in terms of the scheduler's settings.

A cluster that checks logins (SASL), certificates (TLS) and permissions (ACLs) refuses a client
in ways that retrying never fixes. librdkafka reports them as connection failures it keeps
retrying (a wrong password, an untrusted certificate) or as one request's error code (an ACL
that is missing), in words about its own state. Here each becomes a `ConfigurationError` that
names the setting to fix or the ACL an operator must grant, so that a worker or a producer
stops at once with that, instead of waiting out a timeout and blaming the network.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError

from scheduler.errors import ConfigurationError

SECURITY_SETTING = "SCHEDULER_KAFKA_CONFIG"
ACL_DOCS = "docs/kafka.md, 'Connecting to a secured cluster'"

_AUTHORIZATION: dict[int, str] = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
}
"""Kafka's authorization error codes, by the kind of resource whose ACL is missing."""


def principal(config: Mapping[str, Any]) -> str:
    """Who the brokers see, as far as the client's settings tell: `User:<sasl.username>` for a
    SASL login with a user name, else a description (TLS certificates and Kerberos name their
    user on the broker's side)."""
    protocol = str(config.get("security.protocol", "plaintext")).upper()
    username = config.get("sasl.username")
    if protocol.startswith("SASL") and username:
        return f"User:{username}"
    if protocol == "SSL":
        return "the user of the client certificate (ssl.certificate.location)"
    if protocol.startswith("SASL"):
        return f"the {config.get('sasl.mechanism', 'GSSAPI')} login"
    return "User:ANONYMOUS (no login: security.protocol is PLAINTEXT)"


def login_refusal(error: KafkaError, bootstrap: str) -> ConfigurationError | None:
    """A `ConfigurationError` for a connection the brokers refused on its security settings
    (librdkafka's `_AUTHENTICATION` and `_SSL` errors), else None: other connection failures
    (nothing listening, a broker restarting) are transient and stay the caller's to report."""
    code, text = error.code(), error.str()
    if code == KafkaError._AUTHENTICATION:
        if "mechanism" in text and "handshake failed" in text:
            fix = "set sasl.mechanism to one the brokers list"
        else:
            fix = "check sasl.username and sasl.password (and that the user exists on the cluster)"
        what = "refused the login"
    elif code == KafkaError._SSL:
        if "certificate verify failed" in text:
            fix = (
                "set ssl.ca.location to the CA certificate (PEM) that signed the brokers' "
                "certificates, or ssl.endpoint.identification.algorithm=none if only their "
                "names do not match the bootstrap address"
            )
        else:
            fix = "check the ssl.* settings against the brokers' TLS listener"
        what = "refused the TLS connection"
    else:
        return None
    return ConfigurationError(
        f"Kafka at {bootstrap!r} {what}: {text}. Retrying will not help: {fix} in "
        f"{SECURITY_SETTING} (librdkafka's security properties)."
    )


def not_allowed(
    error: KafkaError | None,
    *,
    action: str,
    operation: str,
    resource: str,
    config: Mapping[str, Any],
    alternative: str = "",
) -> ConfigurationError | None:
    """A `ConfigurationError` that names the ACL an operator must grant, when `error` is one of
    Kafka's authorization errors, else None. `action` says what the scheduler was doing ("create
    topic 't'"), `operation` and `resource` the ACL in kafka-acls' words ("Create", "--topic t");
    `alternative` is another way out, as a sentence."""
    if error is None or error.code() not in _AUTHORIZATION:
        return None
    who = principal(config)
    grantee = who if who.startswith("User:") and " " not in who else "<principal>"
    return ConfigurationError(
        f"Kafka did not allow {who} to {action} ({error.str()}). The brokers check ACLs: an "
        f"operator grants this one with `kafka-acls --add --allow-principal {grantee} "
        f"--operation {operation} {resource}` (`scheduler services kafka-tool acls ...` runs "
        f"it).{' ' + alternative if alternative else ''} {ACL_DOCS} lists every ACL the "
        "scheduler needs."
    )


class RefusalRecorder:
    """An `error_cb` for librdkafka clients that keeps the first security refusal it reports,
    for the thread that waits on the client to raise (callbacks run inside `poll`)."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self._lock = threading.Lock()
        self.first: ConfigurationError | None = None

    def __call__(self, error: KafkaError) -> None:
        refusal = login_refusal(error, self._bootstrap)
        if refusal is not None:
            with self._lock:
                if self.first is None:
                    self.first = refusal
