"""A single combined broker+controller Kafka node (KRaft) on 127.0.0.1, run from Maven jars."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from scheduler.services.base import HOST, Server, ServerPaths, classpath, env_port
from scheduler.services.errors import ServiceError
from scheduler.services.maven import Artifact
from scheduler.services.process import run_tool

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


class Kafka(Server):
    """Kafka 4.x in KRaft mode, one process holding both the broker and the controller role."""

    name = "kafka"
    main_class = "kafka.Kafka"
    startup_timeout = 120.0

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
            # Tests create many topics with many partitions: keep each partition's files small
            # (indexes are preallocated at this size) and the recovery/flush work cheap.
            "log.segment.bytes": str(64 * 1024 * 1024),
            "log.index.size.max.bytes": str(1024 * 1024),
            "num.recovery.threads.per.data.dir": "2",
        }

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
            ],
            what=f"formatting Kafka storage in {paths.data} (kafka.tools.StorageTool)",
        )

    def argv(self, java: str, paths: ServerPaths, jars: list[Path]) -> list[str]:
        return [
            java,
            "-Xms256m",
            "-Xmx512m",
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

    def check(self, timeout: float) -> None:
        """A metadata request through the same client library the scheduler uses."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {"bootstrap.servers": self.address, "socket.timeout.ms": int(timeout * 1000)}
        )
        try:
            metadata = admin.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise ServiceError(f"Kafka at {self.address} did not answer metadata: {exc}") from exc
        if not metadata.brokers:
            raise ServiceError(f"Kafka at {self.address} reports no brokers yet")
