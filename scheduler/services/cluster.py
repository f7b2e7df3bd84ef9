"""A replicated local cluster for fault tests: three KRaft Kafka brokers and Cassandra in two
datacenters, on their own loopback addresses and ports, beside the one-node servers.

Kafka: brokers 1-3 (each broker and controller, one static quorum) on 127.0.0.1:19092-19094,
controllers on 19192-19194; topics replicated three times with `min.insync.replicas=2`, so a
write acknowledged with `acks=all` is on at least two brokers. Each broker has a second listener
(19292-19294) advertised as 19392-19394, where nothing listens until a fault test puts a TCP proxy
there (`scheduler.chaos.proxy`): a client bootstrapped on 127.0.0.1:19392 then reaches every
broker only through the proxies, which can delay or cut it.

Cassandra: `dc1` is 127.0.0.2 and 127.0.0.3, `dc2` is 127.0.0.4, all on CQL port 19042 and
storage port 17000 (GossipingPropertyFileSnitch). The scheduler's keyspace is meant to be
NetworkTopologyStrategy dc1:2, dc2:1 read and written at LOCAL_QUORUM from dc1
(`worker_settings`, docs/cassandra.md).
"""

from __future__ import annotations

from pathlib import Path

from scheduler.services.base import HOST, ServerPaths
from scheduler.services.cassandra import Cassandra
from scheduler.services.kafka import ONE_NODE_SETTINGS, Kafka, _cluster_id

BROKERS = 3
KAFKA_PORT = 19092
"""Broker n (1-based) listens on KAFKA_PORT + n - 1."""
CONTROLLER_PORT = 19192
CHAOS_PORT = 19292
"""Broker n's proxied listener binds CHAOS_PORT + n - 1 ..."""
PROXY_PORT = 19392
"""... and is advertised as PROXY_PORT + n - 1, where a test's proxy forwards to it."""
CQL_PORT = 19042
STORAGE_PORT = 17000
CASSANDRA_NODES: tuple[tuple[str, str], ...] = (
    ("127.0.0.2", "dc1"),
    ("127.0.0.3", "dc1"),
    ("127.0.0.4", "dc2"),
)
"""(address, datacenter) of each Cassandra node; the first is the seed."""
LOCAL_DC = "dc1"
REPLICATION = {"dc1": 2, "dc2": 1}

KAFKA_NAMES = tuple(f"cluster-kafka-{n}" for n in range(1, BROKERS + 1))
CASSANDRA_NAMES = tuple(f"cluster-cassandra-{n}" for n in range(1, len(CASSANDRA_NODES) + 1))
NAMES = (*KAFKA_NAMES, *CASSANDRA_NAMES)
"""Every server of the cluster, as `scheduler services` and the launcher name them."""


def datacenter(name: str) -> tuple[str, ...]:
    """The Cassandra servers of datacenter ``name`` (``dc1`` or ``dc2``)."""
    return tuple(
        server
        for server, (_, dc) in zip(CASSANDRA_NAMES, CASSANDRA_NODES, strict=True)
        if dc == name
    )


CLUSTER_SETTINGS: dict[str, str] = {
    **ONE_NODE_SETTINGS,
    "num.partitions": "8",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    # A replica that fell behind never becomes leader: that would drop acknowledged writes.
    "unclean.leader.election.enable": "false",
    # A paused or cut-off broker leaves the ISR after 10 s (Kafka's default 30 s would keep
    # producers with acks=all waiting that long for a replica that is away).
    "replica.lag.time.max.ms": "10000",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
}
"""Broker settings of the cluster beyond listeners, node ids and paths."""


class ClusterKafka(Kafka):
    """Broker ``node`` (1-3) of the three-broker KRaft cluster."""

    heap = ("-Xms256m", "-Xmx256m")
    # A broker killed with kill -9 recovers its logs on the next start; on a loaded 2-core
    # machine (load average 70) that start took over 120 s.
    startup_timeout = 300.0

    def __init__(self, node: int) -> None:
        self.node = node
        self.name = KAFKA_NAMES[node - 1]
        self._port = KAFKA_PORT + node - 1
        self._controller_port = CONTROLLER_PORT + node - 1
        self._chaos_port = CHAOS_PORT + node - 1
        self._proxy_port = PROXY_PORT + node - 1

    @property
    def distribution(self) -> str:
        return "kafka"

    @property
    def ports(self) -> list[int]:
        return [self._port, self._controller_port, self._chaos_port]

    def properties(self, paths: ServerPaths) -> dict[str, str]:
        voters = ",".join(f"{n}@{HOST}:{CONTROLLER_PORT + n - 1}" for n in range(1, BROKERS + 1))
        controller = f"{HOST}:{self._controller_port}"
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node),
            "controller.quorum.voters": voters,
            "listeners": (
                f"PLAINTEXT://{HOST}:{self._port},CHAOS://{HOST}:{self._chaos_port},"
                f"CONTROLLER://{controller}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://{HOST}:{self._port},CHAOS://{HOST}:{self._proxy_port}"
            ),
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": (
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CHAOS:PLAINTEXT"
            ),
            "log.dirs": str(paths.data),
            **CLUSTER_SETTINGS,
        }

    def configure(self, java: str, paths: ServerPaths, jars: list[Path]) -> None:
        # One cluster id for the three brokers: each formats its storage with it.
        shared = paths.root.parent / "cluster-kafka.id"
        if not shared.is_file():
            shared.write_text(_cluster_id() + "\n")
        paths.root.mkdir(parents=True, exist_ok=True)
        (paths.root / "cluster-id").write_text(shared.read_text())
        super().configure(java, paths, jars)


class ClusterCassandra(Cassandra):
    """Cassandra node ``node`` (1-3) of the two-datacenter cluster."""

    heap = "640M"
    cluster_name = "scheduler-cluster"
    snitch = "GossipingPropertyFileSnitch"
    hints = True  # a node back from an outage gets the writes it missed
    # Fault tests kill nodes with kill -9: the schema they hold must survive it, as in production.
    unsafe_system = False
    startup_timeout = 300.0

    def __init__(self, node: int) -> None:
        self.node = node
        self.name = CASSANDRA_NAMES[node - 1]
        self.host, self.datacenter = CASSANDRA_NODES[node - 1]
        self._port = CQL_PORT
        self._storage_port = STORAGE_PORT

    @property
    def distribution(self) -> str:
        return "cassandra"

    def seeds(self) -> str:
        return f"{CASSANDRA_NODES[0][0]}:{STORAGE_PORT}"

    def extra_yaml(self) -> str:
        # A new cluster: nothing to stream from the others, so no bootstrap wait.
        return "auto_bootstrap: false\nmax_hint_window: 1h\n"

    def configure(self, java: str, paths: ServerPaths, jars: list[Path]) -> None:
        super().configure(java, paths, jars)
        (paths.conf / "cassandra-rackdc.properties").write_text(
            f"dc={self.datacenter}\nrack=rack1\n"
        )
        self._rackdc = paths.conf / "cassandra-rackdc.properties"

    def extra_properties(self) -> list[str]:
        return [
            f"-Dcassandra-rackdc.properties={self._rackdc.resolve().as_uri()}",
            "-Dcassandra.ring_delay_ms=3000",
        ]


def server(name: str) -> ClusterKafka | ClusterCassandra | None:
    """The cluster's server called ``name``, or None when ``name`` is not one of `NAMES`."""
    if name in KAFKA_NAMES:
        return ClusterKafka(KAFKA_NAMES.index(name) + 1)
    if name in CASSANDRA_NAMES:
        return ClusterCassandra(CASSANDRA_NAMES.index(name) + 1)
    return None


def kafka_bootstrap(*, proxied: bool = False) -> str:
    """The brokers' addresses; through the proxies' ports when ``proxied``."""
    port = PROXY_PORT if proxied else KAFKA_PORT
    return ",".join(f"{HOST}:{port + n}" for n in range(BROKERS))


def worker_settings(*, proxied_kafka: bool = False) -> dict[str, str]:
    """The SCHEDULER_* environment of a worker (or producer) on this cluster."""
    return {
        "SCHEDULER_LOG": "kafka",
        "SCHEDULER_STORE": "cassandra",
        "SCHEDULER_KAFKA_BOOTSTRAP": kafka_bootstrap(proxied=proxied_kafka),
        "SCHEDULER_KAFKA_REPLICATION_FACTOR": str(BROKERS),
        "SCHEDULER_CASSANDRA_HOSTS": ",".join(
            host for host, dc in CASSANDRA_NODES if dc == LOCAL_DC
        ),
        "SCHEDULER_CASSANDRA_PORT": str(CQL_PORT),
        "SCHEDULER_CASSANDRA_REPLICATION_STRATEGY": "NetworkTopologyStrategy",
        "SCHEDULER_CASSANDRA_DATACENTERS": ",".join(f"{dc}:{n}" for dc, n in REPLICATION.items()),
        "SCHEDULER_CASSANDRA_LOCAL_DC": LOCAL_DC,
        "SCHEDULER_CASSANDRA_CONSISTENCY": "LOCAL_QUORUM",
    }
