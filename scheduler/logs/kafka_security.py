"""What a secured Kafka cluster's refusals mean, said in terms of the scheduler's settings.

librdkafka reports a refused login or certificate as a connection failure it keeps retrying, and
a missing ACL as one request's error code. Here each becomes a `ConfigurationError` that names
the setting to fix or the ACL to grant, instead of a timeout that blames the network.
"""

from __future__ import annotations

import logging
import re
import shlex
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError

from scheduler.errors import ConfigurationError

logger = logging.getLogger("scheduler.logs.kafka")  # kafka_config's, which imports this module

SECURITY_SETTING = "SCHEDULER_KAFKA_CONFIG"
ACL_DOCS = "docs/kafka.md, 'Connecting to a secured cluster'"

AUTHORIZATION_FAILED = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)
"""Kafka's authorization error codes: an ACL is missing on a topic, a group or the cluster."""


_CLIENT_CERTIFICATE_SETTINGS = (
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.keystore.location",
    "ssl_certificate",
)
"""Where librdkafka takes a client certificate from: PEM file, inline PEM, PKCS#12, object."""

_ALERT = re.compile(r"(?:ssl/tls|sslv3|tlsv1[0-9]*) alert ([a-z ]+)")
"""A TLS alert the broker sent, in OpenSSL's words ("ssl/tls alert bad certificate", "tlsv13
alert certificate required"): its TLS refused the client, which retrying does not change."""

_CERTIFICATE_ALERTS = frozenset(
    (
        "bad certificate",
        "unsupported certificate",
        "certificate revoked",
        "certificate expired",
        "certificate unknown",
        "unknown ca",
        "certificate required",
        "access denied",
    )
)
"""Alerts about the client's certificate: a listener with ssl.client.auth=required (mutual TLS)
sends one for a missing certificate or one its truststore does not accept."""

_HANDSHAKE_ALERTS = frozenset(("handshake failure", "protocol version", "insufficient security"))
"""Alerts about the TLS versions or ciphers the two sides allow."""

_RDN_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
"""The attribute names of RFC 2253, which Kafka's default principal of a certificate uses."""


def principal(config: Mapping[str, Any]) -> str:
    """Who the brokers see, as far as the client's settings tell: `User:<sasl.username>` for a
    SASL login with a user name; for mutual TLS, `User:<subject>` of the client certificate, as
    Kafka's default principal builder names it (brokers with ssl.principal.mapping.rules map it
    further); else a description (Kerberos names its user on the broker's side)."""
    protocol = _protocol(config)
    username = config.get("sasl.username")
    if protocol.startswith("SASL") and username:
        return f"User:{username}"
    if protocol == "SSL":
        subject = certificate_subject(config.get("ssl.certificate.location"))
        if subject is not None:
            return f"User:{subject}"
        given = _certificate_setting(config) or "ssl.certificate.location"
        return f"the user of the client certificate ({given})"
    if protocol.startswith("SASL"):
        return f"the {config.get('sasl.mechanism', 'GSSAPI')} login"
    return "User:ANONYMOUS (no login: security.protocol is PLAINTEXT)"


def logs_in(config: Mapping[str, Any]) -> bool:
    """Whether the client logs in as a user of its own (a SASL login or a client certificate),
    which ACLs may then restrict; else it is whoever the brokers let in without one."""
    return _protocol(config).startswith("SASL") or _certificate_setting(config) is not None


def _protocol(config: Mapping[str, Any]) -> str:
    return str(config.get("security.protocol", "plaintext")).upper()


def _certificate_setting(config: Mapping[str, Any]) -> str | None:
    """The setting the client's certificate comes from, if it has one."""
    return next((name for name in _CLIENT_CERTIFICATE_SETTINGS if config.get(name)), None)


def certificate_subject(path: object) -> str | None:
    """The subject of the PEM certificate at `path` as RFC 2253 writes it, most specific name
    first ("CN=app,O=Acme"), the way Java's `X500Principal.getName()` gives it to Kafka; None
    if the file cannot be read or names an attribute RFC 2253 has no name for."""
    if not isinstance(path, str) or not path:
        return None
    try:
        # The standard library's only certificate parser that takes a file; private, but in
        # every CPython since 2.7 (its tests use it). Anything else it does is not relied on.
        decoded = ssl._ssl._test_decode_cert(path)  # type: ignore[attr-defined]
        rdns = decoded["subject"]
        return ",".join(
            "+".join(f"{_RDN_NAMES[name]}={_rfc2253_escaped(value)}" for name, value in rdn)
            for rdn in reversed(rdns)
        )
    except Exception:  # an unreadable file or an unusual subject: the caller describes it
        return None


def _rfc2253_escaped(value: str) -> str:
    """`value` with the escapes of RFC 2253, section 2.4 (Java writes the same)."""
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def login_refusal(
    error: KafkaError,
    bootstrap: str,
    config: Mapping[str, Any] | None = None,
    *,
    meanwhile: str | None = None,
) -> ConfigurationError | None:
    """A `ConfigurationError` for a connection the brokers refused on its security settings
    (`_AUTHENTICATION`, `_SSL`, a TLS alert), else None: other failures are transient.
    `config` tells a missing client certificate from a refused one; `meanwhile` says what a
    client that runs on does until the login is accepted again (without it, the message is for
    a client that stops)."""
    code, text = error.code(), error.str()
    found = _ALERT.search(text)
    alert_name = found.group(1).strip() if found else ""
    also = ""
    if alert_name in _CERTIFICATE_ALERTS:
        what, fix, also = _certificate_refusal(config or {})
    elif alert_name in _HANDSHAKE_ALERTS:
        what = "refused the TLS connection"
        fix = (
            "check ssl.* against the brokers' TLS listener (the TLS versions and cipher suites "
            "both sides allow)"
        )
    elif code == KafkaError._AUTHENTICATION:
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
    where = f"in {SECURITY_SETTING} (librdkafka's security properties)"
    if meanwhile is None:
        return ConfigurationError(
            f"Kafka at {bootstrap!r} {what}: {text}. Retrying will not help: {fix} {where}.{also}"
        )
    return ConfigurationError(
        f"Kafka at {bootstrap!r} {what}: {text}. {meanwhile} To end it, {fix} {where} and "
        f"restart the process, which reads its settings at start, or have the cluster accept "
        f"the login again.{also}"
    )


def _certificate_refusal(config: Mapping[str, Any]) -> tuple[str, str, str]:
    """What a certificate alert means for this client, the fix and another way out: the brokers
    ask for a client certificate (mutual TLS) and got none, or did not accept the one they got."""
    given = _certificate_setting(config)
    if given is None:
        return (
            "requires a client certificate (mutual TLS) and the client sent none",
            "set ssl.certificate.location and ssl.key.location to the PEM files of a "
            "certificate signed by a CA the brokers trust (and ssl.key.password if the key is "
            "encrypted)",
            "",
        )
    subject = certificate_subject(config.get(given))
    return (
        f"did not accept the client certificate{f' {subject}' if subject else ''} ({given})",
        f"set {given} to a certificate that a CA in the brokers' truststore signed and that "
        "has not expired",
        " Or the brokers' operator adds the certificate's CA to their truststore.",
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
    if error is None or error.code() not in AUTHORIZATION_FAILED:
        return None
    who = principal(config)
    grantee = shlex.quote(who) if who.startswith("User:") else "<principal>"
    return ConfigurationError(
        f"Kafka did not allow {who} to {action} ({error.str()}). The brokers check ACLs: an "
        f"operator grants this one with `kafka-acls --add --allow-principal {grantee} "
        f"--operation {operation} {resource}` (`scheduler services kafka-tool acls ...` runs "
        f"it).{' ' + alternative if alternative else ''} {ACL_DOCS} lists every ACL the "
        "scheduler needs."
    )


REFUSAL_LOG_EVERY_S = 60.0
"""A running client's refusal is logged in the scheduler's words at most this often."""
REFUSAL_HOLDS_S = 30.0
"""A refusal reported this recently still holds: while one lasts, librdkafka tries again at
least every `reconnect.backoff.max.ms` (1 s in the scheduler's clients, librdkafka's default
10 s) and is refused each time."""


class RefusalRecorder:
    """An `error_cb` for librdkafka clients (run inside `poll`, on the polling thread).

    It keeps the first security refusal, for the thread that waits on a client to start and
    raises it, and the latest, for a client that runs on (`recent`: a password changed, a
    certificate expired). Given `client`, it logs that once a minute in the scheduler's words.
    """

    def __init__(
        self,
        bootstrap: str,
        config: Mapping[str, Any],
        *,
        client: str | None = None,
        meanwhile: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bootstrap = bootstrap
        self._config = config
        self._client = client
        self._meanwhile = meanwhile
        self._clock = clock
        self._lock = threading.Lock()
        self.first: ConfigurationError | None = None
        self._latest: tuple[float, KafkaError] | None = None
        self._logged_at: float | None = None

    def __call__(self, error: KafkaError) -> None:
        refusal = login_refusal(error, self._bootstrap, self._config)
        if refusal is None:
            return
        now = self._clock()
        with self._lock:
            if self.first is None:
                self.first = refusal
            self._latest = (now, error)
            due = self._logged_at is None or now - self._logged_at >= REFUSAL_LOG_EVERY_S
            log = self._client is not None and due
            if log:
                self._logged_at = now
        if log:
            logger.error("%s: %s", self._client, self._running(error))

    def recent(self) -> ConfigurationError | None:
        """The refusal that holds now, said for a client that runs on; None if the brokers
        have refused nothing for `REFUSAL_HOLDS_S`."""
        with self._lock:
            latest = self._latest
        if latest is None or self._clock() - latest[0] > REFUSAL_HOLDS_S:
            return None
        return self._running(latest[1])

    def _running(self, error: KafkaError) -> ConfigurationError:
        refusal = login_refusal(error, self._bootstrap, self._config, meanwhile=self._meanwhile)
        assert refusal is not None  # recorded because it is one
        return refusal
