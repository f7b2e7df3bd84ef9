"""Logging in and TLS against a real secured node: what each wrong setting looks like.

The secured node (tests/servers.py) checks passwords and requires mutual TLS. A refusal that
retrying cannot fix must stop connecting at once with a `ConfigurationError` naming the setting;
one the node answers by hanging up (as a node going down does) stays a retried
`BackendUnavailableError`, with a hint. Either way the driver's own lines stay out of the log.
The store contract itself runs over this node too (tests/contracts, `cassandra-secured`).
"""

from __future__ import annotations

import logging
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from cassandra.cluster import NoHostAvailable

from scheduler.errors import BackendUnavailableError, ConfigurationError
from scheduler.model import Task
from scheduler.stores._retry import RetryPolicy
from scheduler.stores.cassandra import CassandraTaskStore
from scheduler.stores.cassandra_security import Credentials, TlsOptions, refusal
from tests.servers import (
    SecuredNode,
    cassandra_contact,
    operated_keyspace,
    secured_cassandra,
    secured_cassandra_role,
    superuser_session,
)

FAST = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02)


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CassandraTaskStore, "retry_policy", FAST)


def secured_store(keyspace: str = "scheduler", **security: Any) -> CassandraTaskStore:
    node = secured_cassandra()
    return CassandraTaskStore(
        hosts=node.hosts,
        port=node.port,
        keyspace=keyspace,
        connect_timeout_s=3,
        request_timeout_s=10,
        consistency="ONE",
        **security,
    )


def refused(
    store: CassandraTaskStore, caplog: pytest.LogCaptureFixture, error: type[Exception]
) -> str:
    caplog.set_level(logging.DEBUG, logger="cassandra")
    with pytest.raises(error) as raised:
        store.open(create_schema=False)
    store.close()
    # The product's one line says what to fix; the driver's per-attempt lines would bury it.
    # (The driver's own: a Kafka client another test left open may log meanwhile.)
    driver_lines = [
        r.getMessage()[:120]
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.split(".")[0] == "cassandra"
    ]
    assert driver_lines == []
    return str(raised.value)


def everything_right(node: SecuredNode, **tls: Any) -> dict[str, Any]:
    return {"credentials": secured_cassandra_role(), "tls": node.tls_options(**tls)}


CASES: dict[str, tuple[Callable[[SecuredNode], dict[str, Any]], type[Exception], list[str]]] = {
    "a wrong password": (
        lambda node: {**everything_right(node), "credentials": Credentials("cassandra", "nope")},
        ConfigurationError,
        ["did not accept user 'cassandra'", "password are incorrect", "CASSANDRA_PASSWORD"],
    ),
    "no credentials": (
        lambda node: {"tls": node.tls_options()},
        ConfigurationError,
        ["requires a user name and password", "SCHEDULER_CASSANDRA_USERNAME"],
    ),
    "plain text to a TLS-only node": (
        lambda node: {"credentials": secured_cassandra_role()},
        BackendUnavailableError,
        ["resets plain-text connections", "SCHEDULER_CASSANDRA_TLS=true"],
    ),
    "no CA file (the system's CAs do not know the node's)": (
        lambda node: everything_right(node, ca_file=None),
        ConfigurationError,
        ["certificate is not trusted", "certificate verify failed", "TLS_CA_FILE"],
    ),
}


@pytest.mark.cassandra
@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_connection_names_the_setting_to_fix(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    make, error, fragments = CASES[case]
    message = refused(secured_store(**make(secured_cassandra())), caplog, error)
    assert "127.0.0.1:9142" in message or str(secured_cassandra().port) in message
    for fragment in fragments:
        assert fragment in message


@pytest.mark.cassandra
def test_no_client_certificate_for_a_node_that_requires_one_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Under TLS 1.3 the node's "certificate required" alert may arrive or the connection may just
    # close first; the first is a refusal, the second looks like a node going away (retried).
    node = secured_cassandra()
    store = secured_store(**everything_right(node, cert_file=None, key_file=None))
    caplog.set_level(logging.DEBUG, logger="cassandra")
    with pytest.raises((ConfigurationError, BackendUnavailableError)) as raised:
        store.open(create_schema=False)
    store.close()
    message = str(raised.value)
    assert "SCHEDULER_CASSANDRA_TLS_CERT_FILE" in message
    assert "SCHEDULER_CASSANDRA_TLS_KEY_FILE" in message


@pytest.mark.cassandra
def test_tls_to_a_plain_text_node_is_refused_at_once(caplog: pytest.LogCaptureFixture) -> None:
    hosts, port = cassandra_contact()
    store = CassandraTaskStore(
        hosts=hosts, port=port, tls=secured_cassandra().tls_options(), connect_timeout_s=3
    )
    message = refused(store, caplog, ConfigurationError)
    assert "answers in plain text" in message
    assert "SCHEDULER_CASSANDRA_TLS" in message


def test_a_certificate_naming_another_address_is_refused_with_the_way_out() -> None:
    """cassandra-driver resolves host names and connects to IP addresses, so against the test
    node (whose certificate names 127.0.0.1) no mismatch can be produced: this is the error
    Python's ssl module raises for one, as the driver wraps it."""
    cause = ssl.SSLCertVerificationError(
        1,
        "Tried connecting to [('10.0.0.7', 9042)]. Last error: [SSL: CERTIFICATE_VERIFY_FAILED] "
        "certificate verify failed: IP address mismatch, certificate is not valid for "
        "'10.0.0.7'. (_ssl.c:1006)",
    )
    error = NoHostAvailable("Unable to connect to any servers", {"10.0.0.7:9042": cause})
    refused = refusal(error, target="10.0.0.7:9042", credentials=None)
    assert refused is not None
    assert "certificate is not valid for '10.0.0.7'" in str(refused)
    assert "SCHEDULER_CASSANDRA_TLS_CHECK_HOSTNAME=false" in str(refused)
    # A node that is merely down is not a refusal: that is retried.
    down = NoHostAvailable("", {"10.0.0.7:9042": ConnectionRefusedError(111, "refused")})
    assert refusal(down, target="10.0.0.7:9042", credentials=None) is None


def test_unchecked_host_names_still_verify_the_certificate() -> None:
    context = TlsOptions(check_hostname=False).context()
    assert context.check_hostname is False
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert TlsOptions().context().check_hostname is True


# -- files, before any connection ------------------------------------------------------------


def test_an_unreadable_ca_file_is_a_configuration_error_naming_the_setting(
    tmp_path: Path,
) -> None:
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate\n")
    for path, why in ((tmp_path / "missing.pem", "No such file"), (not_pem, "no certificate")):
        with pytest.raises(ConfigurationError) as raised:
            CassandraTaskStore(hosts=["127.0.0.1"], tls=TlsOptions(ca_file=path))
        assert f"SCHEDULER_CASSANDRA_TLS_CA_FILE={path}" in str(raised.value)
        assert why in str(raised.value)


def test_a_client_certificate_needs_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="both SCHEDULER_CASSANDRA_TLS_CERT_FILE"):
        TlsOptions(cert_file=tmp_path / "client.pem").context()


def encrypted_client_key(tmp_path: Path, password: str) -> Path:
    """The secured node's client key, encrypted with `password` (AES-256, PKCS#8 PEM)."""
    encrypted = tmp_path / "client-encrypted.key"
    subprocess.run(
        [
            "openssl",
            "pkey",
            "-in",
            str(secured_cassandra().tls.client_key),
            "-aes256",
            "-passout",
            f"pass:{password}",
            "-out",
            str(encrypted),
        ],
        check=True,
        capture_output=True,
    )
    assert "ENCRYPTED PRIVATE KEY" in encrypted.read_text()
    return encrypted


@pytest.mark.cassandra
def test_an_encrypted_client_key_is_used_with_its_password(tmp_path: Path) -> None:
    node = secured_cassandra()
    key = encrypted_client_key(tmp_path, "s3cret key")
    store = secured_store(
        keyspace=f"enc_{uuid4().hex[:12]}",
        credentials=secured_cassandra_role(),
        tls=node.tls_options(key_file=key, key_password="s3cret key"),
    )
    store.open(create_schema=True)
    try:
        task = Task("enc", datetime.now(UTC) + timedelta(hours=1), "u1", {"n": 1})
        store.write_tasks(0, [task])
        loaded = store.load_tasks(0, None, task.key.scheduled_ms, 10)
        assert [stored.task for stored in loaded] == [task]
    finally:
        store.close()


@pytest.mark.cassandra
def test_an_encrypted_client_key_without_its_password_names_the_setting(tmp_path: Path) -> None:
    node = secured_cassandra()
    key = encrypted_client_key(tmp_path, "s3cret key")
    # No prompt on the terminal (a worker under a service manager would hang): an error.
    with pytest.raises(ConfigurationError) as raised:
        node.tls_options(key_file=key).context()
    assert f"SCHEDULER_CASSANDRA_TLS_KEY_FILE={key} is encrypted" in str(raised.value)
    assert "set SCHEDULER_CASSANDRA_TLS_KEY_PASSWORD" in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        node.tls_options(key_file=key, key_password="not-the-pw-7731").context()
    assert "check SCHEDULER_CASSANDRA_TLS_KEY_PASSWORD" in str(raised.value)
    assert "not-the-pw-7731" not in str(raised.value)


def test_credentials_keep_the_password_out_of_their_repr() -> None:
    assert "hunter2" not in repr(Credentials("app", "hunter2"))


# -- permissions (CassandraAuthorizer) -------------------------------------------------------


@pytest.fixture
def role_store() -> Iterator[CassandraTaskStore]:
    """A store, not yet open, logged in as a role granted only SELECT and MODIFY on a keyspace
    that the superuser (an operator) made with the scheduler's tables."""
    keyspace = f"operated_{uuid4().hex[:12]}"
    with operated_keyspace(keyspace) as (role, _):
        store = secured_store(
            keyspace=keyspace, credentials=role, tls=secured_cassandra().tls_options()
        )
        try:
            yield store
        finally:
            store.close()


@pytest.mark.cassandra
def test_select_and_modify_on_an_operators_keyspace_are_enough(
    role_store: CassandraTaskStore,
) -> None:
    role_store.open(create_schema=False)
    assert role_store.claim_meta("partitions", "4") == "4"  # the lightweight transaction too
    task = Task("permitted", datetime.now(UTC) + timedelta(hours=1), "k1", {"n": 1})
    role_store.write_tasks(0, [task])
    listed = role_store.list_tasks(0, ordering_id="permitted")
    assert [view.task.key for view in listed] == [task.key]


@pytest.mark.cassandra
def test_a_permission_the_role_lacks_is_named_not_a_traceback(
    role_store: CassandraTaskStore,
) -> None:
    assert role_store.credentials is not None
    # create_schema=True runs CREATE KEYSPACE IF NOT EXISTS, which needs CREATE even when the
    # keyspace exists: the role has no such permission.
    with pytest.raises(ConfigurationError) as raised:
        role_store.open(create_schema=True)
    message = str(raised.value)
    assert "refused to apply the schema" in message
    assert f"User {role_store.credentials.username} has no CREATE permission" in message
    assert "grant the role" in message


# -- a login refused while the store runs ---------------------------------------------------


def change_password(role: Credentials, password: str) -> None:
    """As an operator would with cqlsh. Cassandra refuses a change within 5 s of the last one."""
    with superuser_session() as session:
        deadline = time.monotonic() + 30
        while True:
            try:
                session.execute(f"ALTER ROLE {role.username} WITH PASSWORD = %s", (password,))
                return
            except NoHostAvailable as error:
                if "can only be changed every" not in str(error) or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)


@pytest.mark.cassandra
def test_a_login_refused_after_a_node_restart_is_named_and_the_store_returns_once_accepted(
    role_store: CassandraTaskStore,
) -> None:
    """The password changes under a running store and the node restarts: the driver's new
    connections are refused, and it stops reconnecting to that node for good. The store says
    why, keeps trying, and works again, with what it held, once the login is accepted."""
    from scheduler.services import launcher

    role = role_store.credentials
    assert role is not None
    role_store.open(create_schema=False)
    task = Task("kept", datetime.now(UTC) + timedelta(hours=1), "k1", {"n": 1})
    role_store.write_tasks(0, [task])

    change_password(role, "rotated-" + role.password)
    launcher.restart(launcher.SECURED_CASSANDRA)

    def failure() -> str:
        try:
            role_store.list_tasks(0, ordering_id="kept")
            return ""
        except BackendUnavailableError as error:
            return str(error)

    deadline = time.monotonic() + 60  # a new connection is tried 10 s after all nodes are down
    while "did not accept user" not in (said := failure()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert f"did not accept user {role.username!r}" in said
    assert "SCHEDULER_CASSANDRA_PASSWORD" in said and "connects again every 10 s" in said
    assert "did not accept user" in failure()  # every statement says so, not just one
    problem = role_store.problem()  # what a worker's probes carry
    assert problem is not None and f"did not accept user {role.username!r}" in problem

    change_password(role, role.password)
    deadline = time.monotonic() + 60
    while failure() and time.monotonic() < deadline:
        time.sleep(0.5)
    listed = role_store.list_tasks(0, ordering_id="kept")
    assert [view.task.key for view in listed] == [task.key]
    assert role_store.problem() is None
