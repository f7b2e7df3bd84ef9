"""The named fault scenarios of `scheduler chaos` (issue 45; docs/reliability.md).

Each scenario starts its workers and a steady load on a `ChaosRun`, then injects its fault over
and over until the load ends (a fault begun is always healed), so a longer ``duration_s`` means
more rounds of the same fault.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from scheduler.chaos import faults
from scheduler.chaos.run import ChaosRun
from scheduler.services import cluster, launcher

SESSION_TIMEOUT_S = 10.0
"""The workers' Kafka session timeout (the default `kafka_session_timeout_ms`)."""

Scenario = Callable[[ChaosRun, float], None]


def _rounds(run: ChaosRun, duration_s: float, one_round: Callable[[int], None]) -> None:
    """Start two workers and the load, then run ``one_round(n)`` until the load has ended."""
    if not run.workers:
        run.start(2)
    load = run.start_load(duration_s)
    time.sleep(min(5.0, duration_s / 4))  # some quiet work first: the baseline pause
    n = 0
    while load.running:
        one_round(n)
        n += 1


def _leader_of(run: ChaosRun, partition: int) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap()})
    metadata = admin.list_topics(run.topic, timeout=10)
    leader = metadata.topics[run.topic].partitions[partition].leader
    return cluster.KAFKA_NAMES[leader - 1]


def leader_kill(run: ChaosRun, duration_s: float) -> None:
    """kill -9 the leader of a partition under load, restart it after 8 s."""

    def one_round(n: int) -> None:
        victim = _leader_of(run, n % 8)
        with run.fault(f"kill -9 {victim} (leader)"):
            faults.kill(victim)
            time.sleep(8)
            faults.restart(victim)
        time.sleep(5)

    _rounds(run, duration_s, one_round)


def broker_pause(run: ChaosRun, duration_s: float) -> None:
    """SIGSTOP a broker past the session timeout, then SIGCONT it."""

    def one_round(n: int) -> None:
        victim = cluster.KAFKA_NAMES[n % cluster.BROKERS]
        with run.fault(f"SIGSTOP {victim}"):
            faults.pause(victim)
            try:
                time.sleep(SESSION_TIMEOUT_S + 5)
            finally:
                faults.resume(victim)
        time.sleep(8)

    _rounds(run, duration_s, one_round)


def _cassandra_kill(victims: tuple[str, ...], down_s: float) -> Callable[[ChaosRun, float], None]:
    def scenario(run: ChaosRun, duration_s: float) -> None:
        def one_round(n: int) -> None:
            with run.fault(f"kill -9 {', '.join(victims)}"):
                for victim in victims:
                    faults.kill(victim)
                time.sleep(down_s)
                for victim in victims:
                    faults.restart(victim)
            time.sleep(8)

        _rounds(run, duration_s, one_round)

    return scenario


cassandra_remote_kill = _cassandra_kill((cluster.CASSANDRA_NAMES[2],), 15)
"""The dc2 node killed: LOCAL_QUORUM in dc1 is still reachable, nothing should stall."""
cassandra_quorum_lost = _cassandra_kill((cluster.CASSANDRA_NAMES[1],), 15)
"""A dc1 node killed: LOCAL_QUORUM (2 of dc1's 2) is not reachable; workers stall, nothing
acknowledged is lost."""
dc_stop = _cassandra_kill(cluster.datacenter("dc2"), 25)
"""The whole second datacenter stopped, then started again."""


def cassandra_slow(run: ChaosRun, duration_s: float) -> None:
    """A slow dc1 node: stopped 150 ms of every 400 ms for 20 s (latency without a proxy;
    the driver's connections to it stay up, its answers come late)."""
    victim = cluster.CASSANDRA_NAMES[1]

    def one_round(n: int) -> None:
        with run.fault(f"slow {victim}"):
            until = time.monotonic() + 20
            while time.monotonic() < until:
                faults.pause(victim)
                time.sleep(0.15)
                faults.resume(victim)
                time.sleep(0.25)
        time.sleep(8)

    _rounds(run, duration_s, one_round)


def worker_cut(run: ChaosRun, duration_s: float) -> None:
    """Worker w1 cut off from Kafka (its proxies drop everything) but not from Cassandra, for
    longer than the session timeout; then healed."""
    run.start(2, proxied=1)

    def one_round(n: int) -> None:
        with run.fault("w1 cut from Kafka"):
            for proxy in run.proxies:
                proxy.cut()
            time.sleep(SESSION_TIMEOUT_S * 2)
            for proxy in run.proxies:
                proxy.heal()
        time.sleep(10)

    _rounds(run, duration_s, one_round)


def worker_pause(run: ChaosRun, duration_s: float) -> None:
    """Worker w1 SIGSTOPped past the session timeout (a long GC), then continued."""

    def one_round(n: int) -> None:
        victim = run.workers[0]
        with run.fault("SIGSTOP w1", frozen_worker=victim.pid):
            faults.pause_pid(victim.pid)
            time.sleep(SESSION_TIMEOUT_S + 5)
            faults.resume_pid(victim.pid)
        time.sleep(10)

    _rounds(run, duration_s, one_round)


def worker_kill(run: ChaosRun, duration_s: float) -> None:
    """A worker killed with SIGKILL and replaced by a new one."""

    def one_round(n: int) -> None:
        victim = next(w for w in reversed(run.workers) if w.alive)
        with run.fault(f"kill -9 {victim.name}"):
            victim.kill()
            time.sleep(SESSION_TIMEOUT_S)
        run.worker(f"w{len(run.workers) + 1}").wait_until_owning(180)
        time.sleep(5)

    _rounds(run, duration_s, one_round)


def rolling_restart(run: ChaosRun, duration_s: float) -> None:
    """Every server of the cluster restarted in turn (a clean stop, then a start)."""

    def one_round(n: int) -> None:
        for name in cluster.NAMES:
            with run.fault(f"restart {name}"):
                launcher.restart(name)
            time.sleep(3)

    _rounds(run, duration_s, one_round)


SCENARIOS: dict[str, Scenario] = {
    "leader-kill": leader_kill,
    "broker-pause": broker_pause,
    "cassandra-remote-kill": cassandra_remote_kill,
    "cassandra-quorum-lost": cassandra_quorum_lost,
    "cassandra-slow": cassandra_slow,
    "worker-cut": worker_cut,
    "worker-pause": worker_pause,
    "worker-kill": worker_kill,
    "dc-stop": dc_stop,
    "rolling-restart": rolling_restart,
}
"""Every scenario by the name `scheduler chaos` takes."""
