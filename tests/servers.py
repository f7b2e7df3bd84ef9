"""Where the tests find a real Kafka broker and a real Cassandra node.

Resolution order, for each server separately:

1. ``SCHEDULER_KAFKA_BOOTSTRAP`` / ``SCHEDULER_CASSANDRA_HOSTS`` (comma-separated host[:port]):
   existing servers always win.
2. testcontainers, when a Docker engine answers a ping within a second.
3. The project's own launcher (``scheduler services up``), which fetches the servers from Maven
   Central and reuses ones that are already running.

Nothing here skips: a test marked ``kafka``/``cassandra`` that cannot get its server must fail
loudly, otherwise CI would go green without ever touching Kafka or Cassandra.
"""

from __future__ import annotations

import atexit
import functools
import os
import socket
from typing import Any

CASSANDRA_DEFAULT_PORT = 9042


@functools.cache
def kafka_bootstrap() -> str:
    """``host:port[,host:port]`` of a Kafka broker for this test session."""
    env = os.environ.get("SCHEDULER_KAFKA_BOOTSTRAP", "").strip()
    if env:
        return env
    errors: list[str] = []
    if _docker_available():
        try:
            try:
                from testcontainers.community.kafka import KafkaContainer
            except ImportError:  # testcontainers < 4.14 kept it at the top level
                from testcontainers.kafka import KafkaContainer

            container = _keep(KafkaContainer().with_kraft())
            return str(container.get_bootstrap_server())
        except Exception as exc:  # fall through to the launcher, but say why
            errors.append(f"testcontainers Kafka failed: {exc}")
    return _launch("kafka", errors)


@functools.cache
def cassandra_contact() -> tuple[list[str], int]:
    """Contact points and CQL port of a Cassandra node for this test session."""
    env = os.environ.get("SCHEDULER_CASSANDRA_HOSTS", "").strip()
    if env:
        return parse_hosts(env, CASSANDRA_DEFAULT_PORT)
    errors: list[str] = []
    if _docker_available():
        try:
            try:
                from testcontainers.community.cassandra import CassandraContainer
            except ImportError:
                from testcontainers.cassandra import CassandraContainer

            container = _keep(CassandraContainer("cassandra:5.0"))
            host = container.get_container_host_ip()
            return [host], int(container.get_exposed_port(CASSANDRA_DEFAULT_PORT))
        except Exception as exc:
            errors.append(f"testcontainers Cassandra failed: {exc}")
    return parse_hosts(_launch("cassandra", errors), CASSANDRA_DEFAULT_PORT)


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
