"""The replicated cluster's configuration, as the launcher writes it (no server started here;
tests/chaos/test_cluster.py checks the running cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.services import cluster, launcher
from scheduler.services.base import ServerPaths


def paths(tmp_path: Path, name: str) -> ServerPaths:
    made = ServerPaths(root=tmp_path / name, cache=tmp_path / "cache")
    made.make()
    return made


def test_the_three_brokers_form_one_quorum_and_replicate_every_topic_three_times(
    tmp_path: Path,
) -> None:
    brokers = [launcher.server(name) for name in cluster.KAFKA_NAMES]
    props = [b.properties(paths(tmp_path, b.name)) for b in brokers]  # type: ignore[attr-defined]
    assert {p["node.id"] for p in props} == {"1", "2", "3"}
    assert len({p["controller.quorum.voters"] for p in props}) == 1
    assert props[0]["controller.quorum.voters"].count("@") == 3
    for p in props:
        assert p["default.replication.factor"] == "3"
        assert p["min.insync.replicas"] == "2"
        assert p["offsets.topic.replication.factor"] == "3"
        assert p["unclean.leader.election.enable"] == "false"
    assert [b.address for b in brokers] == cluster.kafka_bootstrap().split(",")
    # No port of the cluster is one of the one-node servers' (9092/9093, 9042, 7000).
    used = {port for b in brokers for port in b.ports}
    assert not used & {9092, 9093, 9192, 9193, 9194}


def test_cassandra_runs_two_nodes_in_dc1_and_one_in_dc2_on_their_own_addresses(
    tmp_path: Path,
) -> None:
    nodes = [launcher.server(name) for name in cluster.CASSANDRA_NAMES]
    hosts = []
    for node in nodes:
        where = paths(tmp_path, node.name)
        conf = yaml.safe_load(node.yaml(where))  # type: ignore[attr-defined]
        assert conf["endpoint_snitch"] == "GossipingPropertyFileSnitch"
        assert conf["listen_address"] == conf["rpc_address"] == node.host
        assert conf["native_transport_port"] == cluster.CQL_PORT != 9042
        assert conf["seed_provider"][0]["parameters"][0]["seeds"] == "127.0.0.2:17000"
        assert conf["hinted_handoff_enabled"] is True
        hosts.append(node.host)
    assert hosts == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert cluster.datacenter("dc1") == cluster.CASSANDRA_NAMES[:2]
    assert cluster.datacenter("dc2") == cluster.CASSANDRA_NAMES[2:]


def test_a_worker_on_the_cluster_writes_at_local_quorum_to_a_keyspace_in_both_dcs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scheduler.settings import Settings

    for variable, value in cluster.worker_settings().items():
        monkeypatch.setenv(variable, value)
    settings = Settings()
    assert settings.cassandra_consistency == "LOCAL_QUORUM"
    assert settings.cassandra_local_dc == "dc1"
    assert settings.cassandra_replication_strategy == "NetworkTopologyStrategy"
    assert settings.cassandra_datacenters == {"dc1": 2, "dc2": 1}
    assert settings.cassandra_hosts == ["127.0.0.2", "127.0.0.3"]
    assert settings.cassandra_port == cluster.CQL_PORT
    assert settings.kafka_replication_factor == 3
    assert settings.kafka_bootstrap == "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"


def test_down_cluster_in_a_state_dir_that_started_nothing_names_every_cluster_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from scheduler.cli.main import cli

    monkeypatch.setenv("SCHEDULER_SERVICES_DIR", str(tmp_path))
    shown = CliRunner().invoke(cli, ["services", "down", "--cluster"])
    assert shown.exit_code == 0, shown.output
    assert [line.split()[0] for line in shown.output.splitlines()] == list(cluster.NAMES)
    assert shown.output.count("was not running") == len(cluster.NAMES)


def test_stopping_a_server_a_fault_test_paused_continues_it_so_it_can_exit(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from scheduler.services.process import alive, terminate

    marker = "paused_server_marker"
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import time  # {marker}\nwhile True: time.sleep(0.1)"]
    )
    try:
        proc.send_signal(signal.SIGSTOP)
        began = time.monotonic()
        # Without SIGCONT the SIGTERM would wait, and only the SIGKILL after `grace` end it.
        terminate(proc.pid, marker, grace=30)
        assert not alive(proc.pid, marker)
        assert time.monotonic() - began < 10
    finally:
        proc.kill()


def test_cluster_nodes_sync_their_schema_to_disk_so_a_kill_keeps_it(tmp_path: Path) -> None:
    node = launcher.server(cluster.CASSANDRA_NAMES[0])
    where = paths(tmp_path, node.name)
    jars = [tmp_path / "jamm-0.4.0.jar"]
    node.configure("java", where, jars)
    argv = node.argv("java", where, jars)
    assert "-Dcassandra.unsafesystem=true" not in argv
    assert any(a.startswith("-Dcassandra-rackdc.properties=file:") for a in argv)
    assert (where.conf / "cassandra-rackdc.properties").read_text() == "dc=dc1\nrack=rack1\n"
    one_node = launcher.server("cassandra")
    assert "-Dcassandra.unsafesystem=true" in one_node.argv("java", where, jars)
