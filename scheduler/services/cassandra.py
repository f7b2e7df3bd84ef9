"""A single Cassandra 5.0 node on 127.0.0.1, run from the cassandra-all jar and its closure.

The JVM flags are the ones Cassandra's own conf/jvm-server.options, conf/jvm17-server.options
and bin/cassandra.in.sh use on Java 17; without the --add-opens/--add-exports set, startup dies
with InaccessibleObjectException (java.io.FileDescriptor.fd) in NativeLibrary.
"""

from __future__ import annotations

import logging
from pathlib import Path

from scheduler.services.base import Server, ServerPaths, classpath, env_port
from scheduler.services.errors import ServiceError
from scheduler.services.maven import Artifact
from scheduler.services.tls import STORE_PASSWORD, TlsFiles

CASSANDRA_VERSION = "5.0.9"

_ADD_EXPORTS = [
    "java.base/jdk.internal.misc",
    "java.management.rmi/com.sun.jmx.remote.internal.rmi",
    "java.management/com.sun.jmx.remote.security",
    "java.rmi/sun.rmi.registry",
    "java.rmi/sun.rmi.server",
    "java.sql/java.sql",
    "java.base/java.lang.ref",
    "jdk.unsupported/sun.misc",
    "jdk.attach/sun.tools.attach",
    "jdk.compiler/com.sun.tools.javac.file",
]
_ADD_OPENS = [
    "java.base/java.lang.module",
    "java.base/jdk.internal.loader",
    "java.base/jdk.internal.ref",
    "java.base/jdk.internal.reflect",
    "java.base/jdk.internal.math",
    "java.base/jdk.internal.module",
    "java.base/jdk.internal.util.jar",
    "jdk.management/com.sun.management.internal",
    "java.base/sun.nio.ch",
    "java.base/java.io",
    "java.base/java.lang.reflect",
    "java.base/java.lang",
    "java.base/java.util",
    "java.base/java.nio",
    "jdk.compiler/com.sun.tools.javac",
]

_LOGBACK = """\
<!-- Written by scheduler.services.cassandra. Console only: stdout goes to server.log. -->
<configuration scan="false">
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
  <logger name="org.apache.cassandra" level="INFO"/>
</configuration>
"""


class Cassandra(Server):
    """Cassandra 5.0 tuned to start fast and stay small: one token, small caches, no snapshots."""

    name = "cassandra"
    main_class = "org.apache.cassandra.service.CassandraDaemon"
    startup_timeout = 180.0
    heap = "2G"
    """-Xms and -Xmx of the JVM. 1G ran out of heap (OutOfMemoryError, the node gone) on a loaded
    day of test runs and benches that had created about a thousand keyspaces; the machine has
    24 GiB, and the cluster's nodes keep their own smaller heap."""
    cluster_name = "scheduler-local"
    snitch = "SimpleSnitch"

    def __init__(self) -> None:
        self._port = env_port("SCHEDULER_SERVICES_CASSANDRA_PORT", 9042)
        self._storage_port = env_port("SCHEDULER_SERVICES_CASSANDRA_STORAGE_PORT", 7000)

    @property
    def port(self) -> int:
        return self._port

    @property
    def ports(self) -> list[int]:
        return [self._port, self._storage_port]

    def artifacts(self) -> list[Artifact]:
        return [Artifact("org.apache.cassandra", "cassandra-all", CASSANDRA_VERSION)]

    def yaml(self, paths: ServerPaths) -> str:
        """cassandra.yaml: only what validation requires plus what makes tests fast."""
        d = paths.data
        return f"""\
# Written by scheduler.services.cassandra on every start; edit the code, not this file.
cluster_name: {self.cluster_name}
num_tokens: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: {self.snitch}
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{self.seeds()}"
listen_address: {self.host}
rpc_address: {self.host}
storage_port: {self._storage_port}
native_transport_port: {self._port}
start_native_transport: true
data_file_directories:
  - {d / "data"}
commitlog_directory: {d / "commitlog"}
saved_caches_directory: {d / "saved_caches"}
hints_directory: {d / "hints"}
cdc_raw_directory: {d / "cdc_raw"}
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 8MiB
commitlog_disk_access_mode: legacy
{self.security_yaml(paths)}
# Tests drop and truncate keyspaces all the time; snapshots would only fill the disk.
auto_snapshot: false
hinted_handoff_enabled: {str(self.hints).lower()}
storage_compatibility_mode: NONE
# Small caches and few threads: a 2-core CI box also runs Kafka, Spark and the tests.
key_cache_size: 8MiB
counter_cache_size: 0MiB
row_cache_size: 0MiB
file_cache_size: 64MiB
concurrent_compactors: 1
concurrent_reads: 8
concurrent_writes: 16
concurrent_counter_writes: 8
memtable_heap_space: 128MiB
memtable_offheap_space: 128MiB
# Cassandra's default, as in production: the store reads in spans of read_slice_ms, so any
# read of ours that comes near it is a bug the tests should see.
tombstone_failure_threshold: 100000
batch_size_fail_threshold: 500KiB
{self.extra_yaml()}"""

    hints = False
    """Whether a coordinator keeps writes for a replica that is down (one node: none is)."""
    unsafe_system = True
    """Skip fsync for system tables: a test node's durability is worth less than speed. A node
    killed with kill -9 then forgets recent schema changes (a keyspace made seconds before)."""

    def seeds(self) -> str:
        """The seed list: this node alone."""
        return f"{self.host}:{self._storage_port}"

    def extra_yaml(self) -> str:
        """More cassandra.yaml lines of this kind of node."""
        return ""

    def security_yaml(self, paths: ServerPaths) -> str:
        """Who may connect, and how: anybody, in plain text."""
        return """\
authenticator:
  class_name: AllowAllAuthenticator
authorizer:
  class_name: AllowAllAuthorizer"""

    def configure(self, java: str, paths: ServerPaths, jars: list[Path]) -> None:
        (paths.conf / "cassandra.yaml").write_text(self.yaml(paths))
        (paths.conf / "logback.xml").write_text(_LOGBACK)

    def argv(self, java: str, paths: ServerPaths, jars: list[Path]) -> list[str]:
        jamm = [j for j in jars if j.name.startswith("jamm-")]
        if not jamm:
            raise ServiceError(f"no jamm jar among the resolved Cassandra jars in {jars[0].parent}")
        return [
            java,
            f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            "-Xss256k",
            "-ea",
            "-da:net.openhft...",
            "-XX:+UseThreadPriorities",
            "-XX:+HeapDumpOnOutOfMemoryError",
            f"-XX:HeapDumpPath={paths.logs}",
            # The scripts kill -9 on OOM: a node limping on after one can corrupt data.
            "-XX:+ExitOnOutOfMemoryError",
            "-XX:+UseTLAB",
            "-XX:+ResizeTLAB",
            "-XX:+PerfDisableSharedMem",
            # AlwaysPreTouch and UseNUMA from the shipped options are left out: they only slow
            # the start of a test node.
            "-XX:+UseG1GC",
            "-XX:+ParallelRefProcEnabled",
            "-XX:MaxTenuringThreshold=1",
            "-XX:G1HeapRegionSize=16m",
            "-XX:G1RSetUpdatingPauseTimePercent=5",
            "-XX:MaxGCPauseMillis=300",
            "-XX:InitiatingHeapOccupancyPercent=70",
            "-Djava.net.preferIPv4Stack=true",
            "-Djdk.attach.allowAttachSelf=true",
            *[f"--add-exports={m}=ALL-UNNAMED" for m in _ADD_EXPORTS],
            *[f"--add-opens={m}=ALL-UNNAMED" for m in _ADD_OPENS],
            "-Dio.netty.tryReflectionSetAccessible=true",
            "-Dio.netty.allocator.useCacheForAllThreads=true",
            "-Dio.netty.allocator.maxOrder=11",
            f"-javaagent:{jamm[0]}",
            # Without this Cassandra closes stdout/stderr after setup and server.log goes quiet.
            "-Dcassandra-foreground=yes",
            f"-Dcassandra.config={(paths.conf / 'cassandra.yaml').resolve().as_uri()}",
            f"-Dcassandra.storagedir={paths.data}",
            f"-Dcassandra.logdir={paths.logs}",
            f"-Dlogback.configurationFile={paths.conf / 'logback.xml'}",
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            *self.extra_properties(),
            *(["-Dcassandra.unsafesystem=true"] if self.unsafe_system else []),
            f"-Djava.io.tmpdir={paths.root / 'tmp'}",
            "-cp",
            classpath(jars),
            self.main_class,
        ]

    def extra_properties(self) -> list[str]:
        """More -D flags of this kind of node."""
        return []

    def connect_options(self) -> dict[str, object]:
        """cassandra-driver `Cluster` arguments the health check needs to get in."""
        return {}

    def check(self, timeout: float) -> None:
        """Connect with cassandra-driver and read the release version from system.local."""
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import WhiteListRoundRobinPolicy

        profile = ExecutionProfile(
            load_balancing_policy=WhiteListRoundRobinPolicy([self.host]), request_timeout=timeout
        )
        cluster = Cluster(
            [self.host],
            port=self._port,
            protocol_version=5,
            connect_timeout=timeout,
            control_connection_timeout=timeout,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            **self.connect_options(),
        )
        # The driver logs every failed attempt at WARNING/ERROR; while polling that is noise.
        quiet = logging.getLogger("cassandra")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            session = cluster.connect()
            row = session.execute("SELECT release_version FROM system.local").one()
        except Exception as exc:
            raise ServiceError(f"Cassandra at {self.address} did not answer CQL: {exc}") from exc
        finally:
            cluster.shutdown()
            quiet.setLevel(level)
        if row is None:
            raise ServiceError(f"Cassandra at {self.address} returned no system.local row")


SUPERUSER = ("cassandra", "cassandra")
"""The role a new node with PasswordAuthenticator creates: the way in to create other roles."""


class SecuredCassandra(Cassandra):
    """A second local node as production clusters run: roles with passwords, permissions, and
    client connections only over TLS with a client certificate (mutual TLS).

    For tests of the product's Cassandra security settings; `scheduler services up
    --secured-cassandra` starts it beside the plain node, on its own ports. Its certificates are
    made on first start (`scheduler.services.tls`) under ``<state dir>/cassandra-secured/tls``.
    """

    name = "cassandra-secured"
    distribution = "cassandra"  # the same jars as the plain node

    def __init__(self, tls_root: Path) -> None:
        self._port = env_port("SCHEDULER_SERVICES_CASSANDRA_SECURED_PORT", 9142)
        self._storage_port = env_port("SCHEDULER_SERVICES_CASSANDRA_SECURED_STORAGE_PORT", 7100)
        self.tls = TlsFiles(tls_root)

    def security_yaml(self, paths: ServerPaths) -> str:
        return f"""\
authenticator:
  class_name: PasswordAuthenticator
authorizer:
  class_name: CassandraAuthorizer
role_manager:
  class_name: CassandraRoleManager
client_encryption_options:
  enabled: true
  optional: false
  keystore: {self.tls.node_keystore}
  keystore_password: {STORE_PASSWORD}
  truststore: {self.tls.node_truststore}
  truststore_password: {STORE_PASSWORD}
  store_type: PKCS12
  require_client_auth: true"""

    def configure(self, java: str, paths: ServerPaths, jars: list[Path]) -> None:
        self.tls.make(java)
        super().configure(java, paths, jars)

    def extra_properties(self) -> list[str]:
        # The default superuser role is made 10 s after startup unless told otherwise; the
        # health check logs in with it, so every start would wait those 10 s.
        return ["-Dcassandra.superuser_setup_delay_ms=0"]

    def check(self, timeout: float) -> None:
        # Said before the TLS code, which refuses a missing CA file as a setting to fix.
        self.tls.require(self.name)
        super().check(timeout)

    def connect_options(self) -> dict[str, object]:
        # The product's own login and TLS code: the health check connects as a client would.
        from scheduler.stores.cassandra_security import Credentials, TlsOptions

        tls = TlsOptions(self.tls.ca, self.tls.client_cert, self.tls.client_key)
        return {"auth_provider": Credentials(*SUPERUSER).provider(), "ssl_context": tls.context()}
