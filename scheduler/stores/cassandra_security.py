"""Logging in to Cassandra and speaking TLS to it, and saying clearly when either goes wrong.

The driver reports a refusal that retrying cannot fix (a wrong password, an untrusted
certificate, TLS on one side only) like a node that is down, as NoHostAvailable; `refusal` picks
them out, so connecting stops at once with an error naming the setting to fix.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cassandra import AuthenticationFailed
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import NoHostAvailable

from scheduler.errors import ConfigurationError

# The settings' environment names, which the messages quote (the CLI's names for them).
USERNAME = "SCHEDULER_CASSANDRA_USERNAME"
PASSWORD = "SCHEDULER_CASSANDRA_PASSWORD"
TLS = "SCHEDULER_CASSANDRA_TLS"
CA_FILE = "SCHEDULER_CASSANDRA_TLS_CA_FILE"
CERT_FILE = "SCHEDULER_CASSANDRA_TLS_CERT_FILE"
KEY_FILE = "SCHEDULER_CASSANDRA_TLS_KEY_FILE"
KEY_PASSWORD = "SCHEDULER_CASSANDRA_TLS_KEY_PASSWORD"
CHECK_HOSTNAME = "SCHEDULER_CASSANDRA_TLS_CHECK_HOSTNAME"


@dataclass(frozen=True)
class Credentials:
    """A role's name and password, for PasswordAuthenticator (or any plain-text SASL login)."""

    username: str
    password: str = field(repr=False)

    def provider(self) -> PlainTextAuthProvider:
        return PlainTextAuthProvider(self.username, self.password)


@dataclass(frozen=True)
class TlsOptions:
    """Client-to-node TLS: whom to trust, and the client's own certificate if nodes ask for one."""

    ca_file: Path | None = None
    """PEM certificates of the CAs that signed the nodes' certificates; None: the system's."""
    cert_file: Path | None = None
    """The client's certificate chain (PEM), for nodes with require_client_auth."""
    key_file: Path | None = None
    """The private key of `cert_file` (PEM)."""
    key_password: str | None = field(default=None, repr=False)
    """The password `key_file` is encrypted with; None for an unencrypted key."""
    check_hostname: bool = True
    """Whether a node's certificate must name the address it was reached at."""

    def context(self) -> ssl.SSLContext:
        """An SSL context from these files, or a `ConfigurationError` naming the bad one."""
        if (self.cert_file is None) != (self.key_file is None):
            raise ConfigurationError(
                f"a client certificate needs both {CERT_FILE} and {KEY_FILE}; set both, or neither"
            )
        try:
            context = ssl.create_default_context(
                cafile=None if self.ca_file is None else str(self.ca_file)
            )
        except (OSError, ssl.SSLError) as error:
            raise ConfigurationError(
                f"cannot read {CA_FILE}={self.ca_file}: {_reason(error)}; give a file of PEM CA "
                "certificates"
            ) from None
        context.check_hostname = self.check_hostname
        if self.key_password is not None and self.key_file is None:
            raise ConfigurationError(f"{KEY_PASSWORD} is set but {KEY_FILE} is not; set both")
        cert_file, key_file = self.cert_file, self.key_file
        if cert_file is None or key_file is None:
            return context
        # Without a password, OpenSSL would ask for one on the terminal: a worker under a
        # service manager would hang or fail obscurely. Answering with an error says what to set.
        password = self.key_password if self.key_password is not None else _no_key_password
        try:
            context.load_cert_chain(str(cert_file), str(key_file), password)
        except _KeyNeedsPassword:
            raise ConfigurationError(
                f"the client key {KEY_FILE}={key_file} is encrypted; set {KEY_PASSWORD} to its "
                "password, or give an unencrypted PEM key"
            ) from None
        except (OSError, ssl.SSLError) as error:
            hint = (
                f"check {KEY_PASSWORD}, and that the key belongs to the certificate"
                if self.key_password is not None
                else "give the PEM certificate and its PEM private key"
            )
            raise ConfigurationError(
                f"cannot load the client certificate {CERT_FILE}={cert_file} with its "
                f"key {KEY_FILE}={key_file}: {_reason(error)}; {hint}"
            ) from None
        return context


class _KeyNeedsPassword(Exception):
    """OpenSSL asked for the password of an encrypted key and none was configured."""


def _no_key_password() -> str:
    raise _KeyNeedsPassword


def per_node(error: BaseException) -> dict[Any, BaseException]:
    """Why each node failed, from a `NoHostAvailable`; empty for other errors, and where the
    driver gives only the nodes' addresses (no pool opened after the control connection, as
    with a local datacenter the cluster does not have)."""
    if isinstance(error, NoHostAvailable) and isinstance(error.errors, dict):
        return error.errors
    return {}


def refusal(
    error: BaseException, *, target: str, credentials: Credentials | None
) -> ConfigurationError | None:
    """The error to stop connecting with, if every node refused this client for a reason that
    retrying cannot fix; None if some node may simply be down or starting (retry)."""
    causes = list(per_node(error).values())
    if not causes:
        return None
    reasons = [_refused(cause, credentials) for cause in causes]
    if any(reason is None for reason in reasons):
        return None
    return ConfigurationError(f"Cassandra at {target} refused the connection: {reasons[0]}")


def not_permitted(error: BaseException, target: str, what: str) -> ConfigurationError:
    """A statement the logged-in role has no permission for (CassandraAuthorizer)."""
    return ConfigurationError(
        f"Cassandra at {target} refused to {what}: {server_words(error)}; grant the role the "
        'permission it names (docs/cassandra.md, "Connecting to a secured cluster", lists '
        f"what the scheduler needs), or log in as another role ({USERNAME})"
    )


def unreachable_hint(error: BaseException, *, tls: TlsOptions | None) -> str:
    """More words for "cannot reach Cassandra" where the failure may be a security setting that
    the node answers by hanging up, as a node going down does: plain text to a node that only
    speaks TLS, or no client certificate to one that requires it (under TLS 1.3 the node's alert
    may be lost, and the client sees the connection close)."""
    causes = list(per_node(error).values())
    if tls is None and any(isinstance(cause, ConnectionResetError) for cause in causes):
        return f"; a node that requires TLS resets plain-text connections: if so, set {TLS}=true"
    if tls is not None and tls.cert_file is None and any(_eof(cause) for cause in causes):
        return (
            "; a node that requires client certificates closes connections without one: "
            f"if so, set {CERT_FILE} and {KEY_FILE}"
        )
    return ""


def _eof(cause: object) -> bool:
    return isinstance(cause, ssl.SSLEOFError) or "EOF occurred in violation" in str(cause)


def _refused(cause: object, credentials: Credentials | None) -> str | None:
    if isinstance(cause, AuthenticationFailed):
        if credentials is None:
            return (
                f"it requires a user name and password; set {USERNAME} and {PASSWORD} "
                "to a role that may log in"
            )
        return (
            f"it did not accept user {credentials.username!r} ({server_words(cause)}); check "
            f"{USERNAME} and {PASSWORD}"
        )
    if not isinstance(cause, OSError) or "SSL" not in str(cause):
        return None
    text = str(cause)
    if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text:
        return (
            f"TLS is on ({TLS}, or a {TLS}_*_FILE setting) but the node answers in plain "
            "text; turn TLS off, or enable client_encryption_options on the nodes"
        )
    if "CERTIFICATE_VERIFY_FAILED" in text:
        if "mismatch" in text:
            return (
                f"its certificate does not name the address it was reached at ({_reason(cause)});"
                " the driver reaches nodes at the IP addresses they advertise (rpc_address), so "
                f"their certificates must name those addresses, or set {CHECK_HOSTNAME}=false"
            )
        return (
            f"its certificate is not trusted ({_reason(cause)}); set {CA_FILE} to the PEM "
            "certificate of the CA that signed the nodes' certificates"
        )
    if "CERTIFICATE_REQUIRED" in text or "BAD_CERTIFICATE" in text or "UNKNOWN_CA" in text:
        return (
            f"it requires a client certificate it trusts ({_reason(cause)}); set {CERT_FILE} "
            f"and {KEY_FILE} to one signed by a CA in the nodes' truststore"
        )
    return f"the TLS handshake failed ({_reason(cause)}); check the {TLS}_* settings"


def server_words(cause: BaseException) -> str:
    """The server's own message, without the driver's prefix and error code."""
    text = str(cause)
    # `Error from server: code=... [...] message="..."`, then perhaps ` info={...}` (Unavailable)
    # or `>` (ConfigurationException's repr-like text); the message may itself hold quotes.
    found = re.search(r'message="(.*)"', text, re.DOTALL)
    if found:
        return found.group(1)
    # The driver's own timeout: `errors=Timed out creating connection (10 seconds), last_host=None`
    found = re.fullmatch(r"errors=(.*), last_host=\S*", text, re.DOTALL)
    return found.group(1) if found else text


def _reason(error: BaseException) -> str:
    """An SSL or OS error's reason, without errno tuples and the C file it came from."""
    text = getattr(error, "strerror", None) or str(error)
    # The driver wraps the SSL error in "Tried connecting to [...]. Last error: [SSL: ...] ...".
    text = text.split("Last error: ")[-1]
    return text.split(" (_ssl.c:")[0]
