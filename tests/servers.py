"""Where the tests find a real Kafka broker and a real Cassandra node.

Resolution order, for each server separately:

1. ``SCHEDULER_KAFKA_BOOTSTRAP`` / ``SCHEDULER_CASSANDRA_HOSTS`` (comma-separated host[:port]):
   existing servers always win.
2. testcontainers, when a Docker engine answers a ping within a second: the project's own
   ``scheduler-kafka:local`` / ``scheduler-cassandra:local`` images (scripts/containers.sh builds
   them without a registry), on the host network, on free ports of 127.0.0.1 (never the
   launcher's 9092/9042). With ``SCHEDULER_TEST_CONTAINERS=1`` (``scripts/test.sh
   --containers``) this is the only way: a container that does not start fails the tests rather
   than falling back to the launcher, whose servers may well be running.
3. The project's own launcher (``scheduler services up``), which fetches the servers from Maven
   Central and reuses ones that are already running.

The secured Cassandra node (password logins, mutual TLS) always comes from the launcher: it
needs certificates and a cassandra.yaml of its own, which the launcher writes.

Nothing here skips: a test marked ``kafka``/``cassandra`` that cannot get its server must fail
loudly, otherwise CI would go green without ever touching Kafka or Cassandra. The other way
round, a test that reaches a server without its marker fails too (`require_marker`): a run with
``-m "not kafka"`` must never start a broker.
"""

from __future__ import annotations

import atexit
import functools
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import pytest

from scheduler.services.tls import TlsFiles
from scheduler.stores.cassandra_security import Credentials, TlsOptions
from tests.http import free_port

if TYPE_CHECKING:
    from cassandra.cluster import Session

CASSANDRA_DEFAULT_PORT = 9042

running_test: pytest.Item | None = None
"""The test being set up or run; tests/conftest.py keeps it current."""


def require_marker(marker: str, server: str) -> None:
    """Fail the running test unless it is marked `marker`: markers are how a run selects or
    leaves out the tests that need a server, so one that is missing is a bug in the test."""
    test = running_test
    if test is not None and test.get_closest_marker(marker) is None:
        pytest.fail(
            f"{test.nodeid} reaches {server} but is not marked `{marker}`: add "
            f"`@pytest.mark.{marker}` (or a module `pytestmark`), so that `-m 'not {marker}'` "
            "leaves it out",
            pytrace=False,
        )


def kafka_bootstrap() -> str:
    """``host:port[,host:port]`` of a Kafka broker for this test session."""
    require_marker("kafka", "a Kafka broker")
    return _kafka_bootstrap()


@functools.cache
def _kafka_bootstrap() -> str:
    env = os.environ.get("SCHEDULER_KAFKA_BOOTSTRAP", "").strip()
    if env:
        return env
    errors: list[str] = []
    if containers_required() or _docker_available():
        try:
            return _kafka_container()
        except Exception as exc:  # fall through to the launcher, but say why
            if containers_required():
                raise
            errors.append(f"testcontainers Kafka failed: {exc}")
    return _launch("kafka", errors)


def containers_required() -> bool:
    """``SCHEDULER_TEST_CONTAINERS=1``: the servers must be containers, nothing else."""
    return os.environ.get("SCHEDULER_TEST_CONTAINERS", "") == "1"


def server_image(name: str) -> str:
    """The image of `name` (``kafka``/``cassandra``): ``$SCHEDULER_TEST_<NAME>_IMAGE``, else the
    one scripts/containers.sh tags ``scheduler-<name>:local``."""
    return os.environ.get(f"SCHEDULER_TEST_{name.upper()}_IMAGE", f"scheduler-{name}:local")


def _server_container(name: str, ports: dict[str, int]) -> Any:
    """Start `name`'s image on the host network with its ports moved to `ports` (variable name
    to port), for the whole session; the container."""
    # Ryuk, testcontainers' reaper, is an image of its own from Docker Hub; `_keep` stops ours.
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    import docker
    from testcontainers.core.container import DockerContainer

    image = server_image(name)
    try:
        docker.from_env().images.get(image)
    except docker.errors.ImageNotFound:
        # Else docker-py would try to pull it, from a registry that has no such image.
        raise RuntimeError(f"no image {image}: build it with scripts/containers.sh") from None
    container = DockerContainer(image).with_kwargs(
        network_mode="host", labels={"scheduler.tests": name}
    )
    for variable, port in ports.items():
        container.with_env(variable, str(port))
    return _keep(container)


def _wait_until(container: Any, what: str, answers: Callable[[], bool], timeout: float) -> None:
    """Poll `answers` until True; fail with the container's log tail when it exits or times out."""
    import time

    deadline = time.monotonic() + timeout
    while not answers():
        container.get_wrapped_container().reload()
        exited = container.get_wrapped_container().status == "exited"
        if exited or time.monotonic() > deadline:
            stdout, stderr = container.get_logs()
            tail = "\n".join((stdout + stderr).decode(errors="replace").splitlines()[-30:])
            state = "exited" if exited else f"did not answer within {timeout:.0f} s"
            raise RuntimeError(
                f"{what} in container {container.get_wrapped_container().short_id} {state}:\n{tail}"
            )
        time.sleep(1)


def _kafka_container() -> str:
    """Kafka from the project's image: the launcher's broker, with its settings (KIP-848 groups
    included), on free ports of 127.0.0.1."""
    from confluent_kafka.admin import AdminClient

    port = free_port()
    container = _server_container(
        "kafka",
        {
            "SCHEDULER_SERVICES_KAFKA_PORT": port,
            "SCHEDULER_SERVICES_KAFKA_CONTROLLER_PORT": free_port(),
        },
    )
    bootstrap = f"127.0.0.1:{port}"

    def answers() -> bool:
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000})
        try:
            admin.list_topics(timeout=2)
        except Exception:
            return False
        return True

    _wait_until(container, "Kafka", answers, timeout=120)
    return bootstrap


def cassandra_contact() -> tuple[list[str], int]:
    """Contact points and CQL port of a Cassandra node for this test session."""
    require_marker("cassandra", "a Cassandra node")
    return _cassandra_contact()


@functools.cache
def _cassandra_contact() -> tuple[list[str], int]:
    env = os.environ.get("SCHEDULER_CASSANDRA_HOSTS", "").strip()
    if env:
        return parse_hosts(env, CASSANDRA_DEFAULT_PORT)
    errors: list[str] = []
    if containers_required() or _docker_available():
        try:
            return _cassandra_container()
        except Exception as exc:
            if containers_required():
                raise
            errors.append(f"testcontainers Cassandra failed: {exc}")
    return parse_hosts(_launch("cassandra", errors), CASSANDRA_DEFAULT_PORT)


def _cassandra_container() -> tuple[list[str], int]:
    """Cassandra from the project's image: the launcher's node, on free ports of 127.0.0.1."""
    from cassandra.cluster import Cluster

    port = free_port()
    container = _server_container(
        "cassandra",
        {
            "SCHEDULER_SERVICES_CASSANDRA_PORT": port,
            "SCHEDULER_SERVICES_CASSANDRA_STORAGE_PORT": free_port(),
        },
    )

    def answers() -> bool:
        cluster = Cluster(["127.0.0.1"], port=port, protocol_version=4, connect_timeout=2)
        try:
            cluster.connect().execute("SELECT release_version FROM system.local")
        except Exception:
            return False
        finally:
            cluster.shutdown()
        return True

    _wait_until(container, "Cassandra", answers, timeout=180)
    return ["127.0.0.1"], port


def parse_hosts(value: str, default_port: int) -> tuple[list[str], int]:
    """Split ``a,b:9043`` into hosts and one port (cassandra-driver takes a single port)."""
    hosts: list[str] = []
    ports: set[int] = set()
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if sep and port.isdigit() and "]" not in port:
            hosts.append(host.strip("[]"))
            ports.add(int(port))
        else:
            hosts.append(item.strip("[]"))
    if not hosts:
        raise RuntimeError(f"no hosts in {value!r}")
    if len(ports) > 1:
        raise RuntimeError(f"all Cassandra hosts must share one port, got {sorted(ports)}")
    return hosts, ports.pop() if ports else default_port


def _launch(name: str, errors: list[str]) -> str:
    from scheduler.services import launcher
    from scheduler.services.errors import ServiceError

    try:
        return launcher.start(name).address
    except ServiceError as exc:
        errors.append(f"local launcher failed: {exc}")
    variable = "SCHEDULER_KAFKA_BOOTSTRAP" if name == "kafka" else "SCHEDULER_CASSANDRA_HOSTS"
    raise RuntimeError(
        f"no {name} server for the tests. Set {variable} to an existing server, start Docker "
        f"for testcontainers, or fix the local launcher (`scheduler services up`).\n"
        + "\n".join(errors)
    )


def _keep(container: Any) -> Any:
    """Start a container for the whole session and stop it when the interpreter exits."""
    container.start()
    atexit.register(container.stop)
    return container


def _docker_available(timeout: float = 1.0) -> bool:
    """Cheap check that a Docker engine answers: GET /_ping on its socket or DOCKER_HOST."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        if host.startswith("unix://"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(host[len("unix://") :])
        elif host.startswith("tcp://"):
            address, _, port = host[len("tcp://") :].rstrip("/").rpartition(":")
            sock = socket.create_connection((address, int(port)), timeout=timeout)
        else:
            return False
        with sock:
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in sock.recv(64)
    except (OSError, ValueError):
        return False


@dataclass(frozen=True)
class SecuredNode:
    """The launcher's second Cassandra node: password logins, mutual TLS (see
    `scheduler.services.cassandra.SecuredCassandra`)."""

    hosts: list[str]
    port: int
    tls: TlsFiles
    superuser: tuple[str, str]

    def tls_options(self, **overrides: Any) -> TlsOptions:
        """What a client that does everything right uses; `overrides` replace fields."""
        options = {
            "ca_file": self.tls.ca,
            "cert_file": self.tls.client_cert,
            "key_file": self.tls.client_key,
        }
        return TlsOptions(**{**options, **overrides})

    def settings_env(self, credentials: Credentials) -> dict[str, str]:
        """The `SCHEDULER_CASSANDRA_*` variables of a process that connects with `credentials`."""
        return {
            "SCHEDULER_CASSANDRA_HOSTS": ",".join(f"{host}:{self.port}" for host in self.hosts),
            "SCHEDULER_CASSANDRA_USERNAME": credentials.username,
            "SCHEDULER_CASSANDRA_PASSWORD": credentials.password,
            "SCHEDULER_CASSANDRA_TLS_CA_FILE": str(self.tls.ca),
            "SCHEDULER_CASSANDRA_TLS_CERT_FILE": str(self.tls.client_cert),
            "SCHEDULER_CASSANDRA_TLS_KEY_FILE": str(self.tls.client_key),
        }


def _launched_for_tests(name: str) -> tuple[Any, str]:
    """A secured server from the launcher, started for this session unless already running
    (then stopped at exit: only a few tests need it); the server and its address."""
    from scheduler.services import launcher

    was_running = launcher.status(name).pid is not None
    try:
        status = launcher.start(name)
    except Exception as exc:
        raise RuntimeError(
            f"no {name} for the tests: `scheduler services up --{launcher.SECURED_FLAGS[name]}` "
            f"failed: {exc}"
        ) from exc
    if not was_running:
        atexit.register(launcher.stop, name)
    return launcher.server(name), status.address


def secured_cassandra() -> SecuredNode:
    """The secured node, from the launcher."""
    require_marker("cassandra", "the secured Cassandra node")
    return _secured_cassandra()


@functools.cache
def _secured_cassandra() -> SecuredNode:
    from scheduler.services import launcher
    from scheduler.services.cassandra import SUPERUSER, SecuredCassandra

    server, address = _launched_for_tests(launcher.SECURED_CASSANDRA)
    assert isinstance(server, SecuredCassandra)
    hosts, port = parse_hosts(address, server.port)
    return SecuredNode(hosts, port, server.tls, SUPERUSER)


@contextmanager
def superuser_session() -> Iterator[Session]:
    """A driver session on the secured node as its superuser: an operator's cqlsh."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    node = secured_cassandra()
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(node.hosts))
    cluster = Cluster(
        node.hosts,
        port=node.port,
        protocol_version=4,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        auth_provider=Credentials(*node.superuser).provider(),
        ssl_context=node.tls_options().context(),
    )
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


@functools.cache
def secured_cassandra_role() -> Credentials:
    """A role made for the tests on the secured node: it may log in and create keyspaces (and so
    owns the ones it creates), nothing more; the product must not need a superuser."""
    # A role per session: Cassandra refuses a password change within 5 s of the last one.
    role = Credentials(f"scheduler_tests_{uuid4().hex[:12]}", f"pw-{uuid4().hex}")
    with superuser_session() as session:
        session.execute(
            f"CREATE ROLE {role.username} WITH LOGIN = true AND PASSWORD = %s", (role.password,)
        )
        session.execute(f"GRANT CREATE ON ALL KEYSPACES TO {role.username}")
    return role


@contextmanager
def operated_keyspace(keyspace: str) -> Iterator[tuple[Credentials, Session]]:
    """`keyspace` with the scheduler's tables, made by the superuser as an operator would, and a
    new role granted only SELECT and MODIFY on it. Yields the role and the superuser's session
    (to grant or revoke more); drops both at exit."""
    from scheduler.stores.cassandra import CassandraTaskStore

    node = secured_cassandra()
    role = Credentials(f"app_{uuid4().hex[:12]}", f"pw-{uuid4().hex}")
    admin = CassandraTaskStore(
        hosts=node.hosts,
        port=node.port,
        keyspace=keyspace,
        consistency="ONE",
        credentials=Credentials(*node.superuser),
        tls=node.tls_options(),
    )
    admin.apply_schema()
    with superuser_session() as session:
        session.execute(
            f"CREATE ROLE {role.username} WITH LOGIN = true AND PASSWORD = %s", (role.password,)
        )
        for permission in ("SELECT", "MODIFY"):
            session.execute(f"GRANT {permission} ON KEYSPACE {keyspace} TO {role.username}")
        try:
            yield role, session
        finally:
            admin.drop_keyspace()
            admin.close()
            session.execute(f"DROP ROLE {role.username}")


@dataclass(frozen=True)
class SecuredBroker:
    """The launcher's second Kafka broker: TLS, SCRAM-SHA-512 logins and ACLs (see
    `scheduler.services.kafka.SecuredKafka`)."""

    bootstrap: str
    tls: TlsFiles
    admin: tuple[str, str]
    certificate_bootstrap: str
    """The mutual-TLS listener, where clients log in with a certificate."""
    certificate_login: dict[str, str]
    """The librdkafka settings that log in there with the client certificate, as
    `scheduler.services.kafka.CERT_PRINCIPAL` (who has no ACL but those a test grants)."""

    def login(self, username: str, password: str) -> dict[str, str]:
        """The librdkafka settings of a client that logs in as `username`."""
        from scheduler.services.kafka import login_config

        return login_config(self.tls.ca, username, password)

    def admin_client(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, **self.login(*self.admin)})


def secured_kafka() -> SecuredBroker:
    """The secured broker, from the launcher."""
    require_marker("kafka", "the secured Kafka broker")
    return _secured_kafka()


@functools.cache
def _secured_kafka() -> SecuredBroker:
    from scheduler.services import launcher
    from scheduler.services.kafka import ADMIN, SecuredKafka

    server, address = _launched_for_tests(launcher.SECURED_KAFKA)
    assert isinstance(server, SecuredKafka)
    return SecuredBroker(
        address, server.tls, ADMIN, server.mtls_address, server.certificate_config()
    )


Acl = tuple[str, str, str]
"""(resource type, name, operation) as kafka-acls says them: ("topic", "t", "Read"). A name
ending in `*` is a prefix."""


def secured_kafka_user(*acls: Acl) -> dict[str, str]:
    """A new SCRAM user on the secured broker, allowed `acls` and nothing else; returns the
    librdkafka settings that log in as it. Waits until the broker has applied both."""
    username, password = f"user-{uuid4().hex[:10]}", f"pw-{uuid4().hex}"
    set_kafka_password(username, password)
    grant_kafka_acls(username, *acls)
    return secured_kafka().login(username, password)


def set_kafka_password(username: str, password: str | None) -> None:
    """Give `username` this SCRAM password on the secured broker (creating the user), or with
    None delete its credential, so that its next login is refused. Waits until the broker
    accepts a new password; a deletion is not waited for."""
    import time

    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    broker = secured_kafka()
    change: Any = (
        UserScramCredentialDeletion(username, ScramMechanism.SCRAM_SHA_512)
        if password is None
        else UserScramCredentialUpsertion(
            username, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
        )
    )
    admin = broker.admin_client()  # held: a collected client fails its pending futures
    for future in admin.alter_user_scram_credentials([change]).values():
        future.result()
    if password is None:
        return
    config = broker.login(username, password)
    # The credential is a metadata record the broker applies a moment after the controller
    # commits it.
    deadline = time.monotonic() + 10
    while True:
        try:
            AdminClient({"bootstrap.servers": broker.bootstrap, **config}).list_topics(timeout=2)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def _bindings(username: str, acls: tuple[Acl, ...]) -> list[Any]:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return [
        AclBinding(
            ResourceType[kind.upper()],
            name.rstrip("*"),
            ResourcePatternType.PREFIXED if name.endswith("*") else ResourcePatternType.LITERAL,
            f"User:{username}",
            "*",
            AclOperation[operation.upper()],
            AclPermissionType.ALLOW,
        )
        for kind, name, operation in acls
    ]


def grant_kafka_acls(username: str, *acls: Acl) -> None:
    """Allow `username` `acls` on the secured broker; waits until the broker applies them.
    `username` is the principal's name, without `User:` (a certificate's: `CN=scheduler`)."""
    admin = secured_kafka().admin_client()
    bindings = _bindings(username, acls)
    if bindings:
        for future in admin.create_acls(bindings).values():
            future.result()
    _wait_for_acls(username, lambda seen: all(b in seen for b in bindings))


def revoke_kafka_acls(username: str, *acls: Acl) -> None:
    """Take `acls` from `username` on the secured broker; waits until the broker applies it."""
    from confluent_kafka.admin import AclBindingFilter

    admin = secured_kafka().admin_client()
    bindings = _bindings(username, acls)
    filters = [
        AclBindingFilter(
            b.restype,
            b.name,
            b.resource_pattern_type,
            b.principal,
            b.host,
            b.operation,
            b.permission_type,
        )
        for b in bindings
    ]
    for future in admin.delete_acls(filters).values():
        future.result()
    _wait_for_acls(username, lambda seen: not any(b in seen for b in bindings))


def _wait_for_acls(username: str, applied: Callable[[list[Any]], bool]) -> None:
    """Until the broker's authorizer shows `username`'s ACLs as `applied` wants them: ACLs are
    metadata records it applies a moment after the controller commits them."""
    import time

    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    mine = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        f"User:{username}",
        None,  # type: ignore[arg-type]  # any host; the stubs want a str
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    admin = secured_kafka().admin_client()
    deadline = time.monotonic() + 10
    while not applied(admin.describe_acls(mine).result()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the broker did not apply the ACL change of {username} in 10 s")
        time.sleep(0.1)


def self_signed_certificate(directory: Path, subject: str) -> tuple[Path, Path]:
    """A certificate (PEM) with `subject` ("/O=Acme/CN=app") that no CA signed, and its key."""
    import subprocess

    certificate, key = directory / "self-signed.pem", directory / "self-signed.key"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
    files = ["-keyout", str(key), "-out", str(certificate)]
    subprocess.run([*request, "-subj", subject, *files], check=True, capture_output=True)
    return certificate, key
