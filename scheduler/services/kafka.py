"""A single combined broker+controller Kafka node (KRaft) on 127.0.0.1, run from Maven jars."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from scheduler.services.base import HOST, Server, ServerPaths, classpath, env_port
from scheduler.services.errors import ServiceError
from scheduler.services.maven import Artifact
from scheduler.services.process import run_tool
from scheduler.services.tls import STORE_PASSWORD, TlsFiles

KAFKA_VERSION = "4.1.2"
# Kafka publishes no slf4j binding in its POMs (the tarball adds it), so without this the broker
# logs nothing at all; 2.24.3 is the log4j2 version Kafka 4.1 itself builds against.
LOG4J_VERSION = "2.24.3"

_LOG4J2 = """\
# Written by scheduler.services.kafka. Console only: the launcher sends stdout to server.log.
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
"""


def _cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes, base64url without padding.

    Like Kafka's own generator, never start with '-' (the CLI would read it as an option).
    """
    while True:
        value = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not value.startswith("-"):
            return value


ONE_NODE_SETTINGS: dict[str, str] = {
    "num.partitions": "1",
    # One node: every internal topic must have replication factor 1 or it is never
    # created and consumer groups / transactions hang.
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    # Tests join and leave groups constantly; the default 3 s delay slows every join.
    "group.initial.rebalance.delay.ms": "0",
    # Let rebalance tests use short session timeouts (default minimum is 6 s).
    "group.min.session.timeout.ms": "1000",
    # Groups on KIP-848's `consumer` protocol take their session timeout and heartbeat
    # from the broker (45 s and 5 s by default, and no lower): give them the workers'
    # classic settings, so that either protocol fails over and rebalances alike here.
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
    # Tests create many topics with many partitions: keep each partition's files small
    # (indexes are preallocated at this size) and the recovery/flush work cheap.
    "log.segment.bytes": str(64 * 1024 * 1024),
    "log.index.size.max.bytes": str(1024 * 1024),
    "num.recovery.threads.per.data.dir": "2",
}
"""Broker settings of the one-node Kafka the tests use, beside its listeners and paths: the
launcher's (`Kafka.properties`) and the testcontainers broker's (tests/servers.py)."""


class Kafka(Server):
    """Kafka 4.x in KRaft mode, one process holding both the broker and the controller role."""

    name = "kafka"
    main_class = "kafka.Kafka"
    startup_timeout = 120.0
    heap: tuple[str, ...] = ("-Xms256m", "-Xmx512m")
    """The JVM's heap flags."""

    def __init__(self) -> None:
        self._port = env_port("SCHEDULER_SERVICES_KAFKA_PORT", 9092)
        self._controller_port = env_port("SCHEDULER_SERVICES_KAFKA_CONTROLLER_PORT", 9093)

    @property
    def port(self) -> int:
        return self._port

    @property
    def ports(self) -> list[int]:
        return [self._port, self._controller_port]

    def artifacts(self) -> list[Artifact]:
        return [
            Artifact("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),
            Artifact("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
            Artifact("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
        ]

    def properties(self, paths: ServerPaths) -> dict[str, str]:
        """Broker settings for one node used by tests and local runs."""
        controller = f"{HOST}:{self._controller_port}"
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            # Static quorum: works without --standalone and survives re-formatting with -g.
            "controller.quorum.voters": f"1@{controller}",
            "listeners": f"PLAINTEXT://{HOST}:{self._port},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self._port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(paths.data),
            **ONE_NODE_SETTINGS,
        }

    def format_options(self) -> list[str]:
        """Extra options of the storage format that runs once, before the first start."""
        return []

    def configure(self, java: str, paths: ServerPaths, jars: list[Path]) -> None:
        props = paths.conf / "server.properties"
        props.write_text(
            "# Written by scheduler.services.kafka on every start; edit the code, not this file.\n"
            + "".join(f"{k}={v}\n" for k, v in self.properties(paths).items())
        )
        (paths.conf / "log4j2.properties").write_text(_LOG4J2)
        if (paths.data / "meta.properties").is_file():
            return
        id_file = paths.root / "cluster-id"
        if not id_file.is_file():
            id_file.write_text(_cluster_id() + "\n")
        # StorageTool ends with System.exit, so it gets its own short-lived JVM.
        run_tool(
            [
                java,
                "-Xmx256m",
                f"-Dlog4j2.configurationFile={paths.conf / 'log4j2.properties'}",
                "-cp",
                classpath(jars),
                "kafka.tools.StorageTool",
                "format",
                "-t",
                id_file.read_text().strip(),
                "-c",
                str(props),
                "--ignore-formatted",
                *self.format_options(),
            ],
            what=f"formatting Kafka storage in {paths.data} (kafka.tools.StorageTool)",
            # A JVM that needs seconds alone took over 120 s on a 2-core machine under load.
            timeout=self.startup_timeout * 5,
        )

    def argv(self, java: str, paths: ServerPaths, jars: list[Path]) -> list[str]:
        return [
            java,
            *self.heap,
            # The flags kafka-run-class.sh uses for the broker.
            "-server",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-XX:MaxInlineLevel=15",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={paths.logs}",
            f"-Dlog4j2.configurationFile={paths.conf / 'log4j2.properties'}",
            "-cp",
            classpath(jars),
            self.main_class,
            str(paths.conf / "server.properties"),
        ]

    def client_config(self) -> dict[str, str]:
        """librdkafka settings, beyond the bootstrap address, of a client that may connect."""
        return {}

    def check(self, timeout: float) -> None:
        """A metadata request through the same client library the scheduler uses."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {
                "bootstrap.servers": self.address,
                "socket.timeout.ms": int(timeout * 1000),
                **self.client_config(),
            }
        )
        try:
            metadata = admin.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise ServiceError(f"Kafka at {self.address} did not answer metadata: {exc}") from exc
        if not metadata.brokers:
            raise ServiceError(f"Kafka at {self.address} reports no brokers yet")


SCRAM_MECHANISM = "SCRAM-SHA-512"
ADMIN = ("scheduler-admin", "scheduler-admin-secret")
"""The secured broker's super user (SCRAM): the way in to create users and ACLs. The broker
also talks to itself as this user. The password guards a loopback test broker."""
REAUTH_MS = 10_000
"""The secured broker's `connections.max.reauth.ms`: how long a SASL login lasts."""
CERT_PRINCIPAL = "User:CN=scheduler"
"""Who the secured broker's client certificate (`TlsFiles.client_cert`) logs in as."""


class SecuredKafka(Kafka):
    """A second local broker as production clusters run: clients connect over TLS and log in
    with SCRAM-SHA-512 (listener SASL_SSL), or with a client certificate (listener SSL, mutual
    TLS), and an authorizer refuses what no ACL allows.

    For tests of the product's Kafka security settings; `scheduler services up --secured-kafka`
    starts it beside the plain broker, on its own ports. Its certificates are made on first start
    (`scheduler.services.tls`) under ``<state dir>/kafka-secured/tls``; its one user at first is
    the super user `ADMIN`, whose SCRAM credential is written when the storage is formatted. The
    client certificate's user, `CERT_PRINCIPAL`, is allowed nothing until ACLs say otherwise.
    """

    name = "kafka-secured"
    distribution = "kafka"  # the same jars as the plain broker

    def __init__(self, tls_root: Path) -> None:
        self._port = env_port("SCHEDULER_SERVICES_KAFKA_SECURED_PORT", 9192)
        self._controller_port = env_port("SCHEDULER_SERVICES_KAFKA_SECURED_CONTROLLER_PORT", 9193)
        self._mtls_port = env_port("SCHEDULER_SERVICES_KAFKA_SECURED_MTLS_PORT", 9194)
        self.tls = TlsFiles(tls_root)

    @property
    def ports(self) -> list[int]:
        return [*super().ports, self._mtls_port]

    @property
    def mtls_address(self) -> str:
        """The listener where clients log in with a certificate instead of a password."""
        return f"{HOST}:{self._mtls_port}"

    def properties(self, paths: ServerPaths) -> dict[str, str]:
        controller = f"{HOST}:{self._controller_port}"
        user, password = ADMIN
        return {
            **super().properties(paths),
            "listeners": (
                f"SASL_SSL://{HOST}:{self._port},SSL://{self.mtls_address},"
                f"CONTROLLER://{controller}"
            ),
            "advertised.listeners": f"SASL_SSL://{HOST}:{self._port},SSL://{self.mtls_address}",
            "inter.broker.listener.name": "SASL_SSL",
            "listener.security.protocol.map": ("CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL"),
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
            # The broker's own login when it connects to its listener (one node: to itself).
            f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{user}" password="{password}";'
            ),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.tls.node_keystore),
            "ssl.keystore.password": STORE_PASSWORD,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.tls.node_truststore),
            "ssl.truststore.password": STORE_PASSWORD,
            "ssl.client.auth": "none",
            # Mutual TLS on the SSL listener only: a client without a certificate the CA signed
            # is refused in the handshake, and one with it is `CERT_PRINCIPAL` (Kafka's default
            # principal builder names the certificate's subject).
            "listener.name.ssl.ssl.client.auth": "required",
            # Logins last 10 s (KIP-368): librdkafka logs in again before that on every
            # connection, so a password changed or a user deleted is refused within seconds,
            # not at the next reconnect, hours later, as on a cluster without it.
            "connections.max.reauth.ms": str(REAUTH_MS),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The controller listener stays plaintext on loopback, where the broker half of
            # this process reaches the controller half as ANONYMOUS; it must be allowed the
            # cluster actions. Clients cannot use that listener: it answers controller APIs only.
            "super.users": f"User:{user};User:ANONYMOUS",
        }

    def format_options(self) -> list[str]:
        user, password = ADMIN
        return ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]

    def configure(self, java: str, paths: ServerPaths, jars: list[Path]) -> None:
        self.tls.make(java)
        super().configure(java, paths, jars)

    def client_config(self) -> dict[str, str]:
        return login_config(self.tls.ca, *ADMIN)

    def check(self, timeout: float) -> None:
        # Said before librdkafka, which refuses a missing CA file in words about OpenSSL.
        self.tls.require(self.name)
        super().check(timeout)

    def certificate_config(self) -> dict[str, str]:
        """The librdkafka settings of a client that logs in on `mtls_address` with the client
        certificate, as `CERT_PRINCIPAL`."""
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.tls.ca),
            "ssl.certificate.location": str(self.tls.client_cert),
            "ssl.key.location": str(self.tls.client_key),
        }


def login_config(ca_file: Path, username: str, password: str) -> dict[str, str]:
    """The librdkafka settings that log in to the secured broker as `username`."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.username": username,
        "sasl.password": password,
        "ssl.ca.location": str(ca_file),
    }
