"""Faults on containers, under load: the compose file's workers and its Kafka killed (`docker
kill`) and paused past the group's session timeout (`docker pause`), and a worker held to a CPU
and memory limit. Every task the log acknowledged runs: each acknowledged key is counted against
the attempts the workers recorded.

The stack is docker/docker-compose.yml on the project's images, with the workers running
`recording_executor` (scheduler/fleet/history.py) into a directory of the host, and worker-1
limited, as a compose file of the test's own adds them. Host networking, so nothing leaves
loopback. Marked `containers`: `scripts/container-faults.sh` runs them (before a release; not in
the CI test command, for its time budget).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from scheduler.client import SchedulerClient
from scheduler.fleet import HistoryReport, KeyTuple, LoadGenerator, read_history
from scheduler.fleet.history import RECORD_ENV, check_history
from scheduler.logs.kafka_config import CONSUMER_DEFAULTS
from scheduler.partitioning import partition_for
from scheduler.runtime import build_log
from scheduler.settings import Settings
from tests.distributed.conftest import some_sleep
from tests.services.compose_stack import WORKERS, Stack, docker, ran_on, wait_for

pytestmark = [pytest.mark.containers, pytest.mark.slow]

RECORD_DIR = "/record"
"""Where the workers' record directory (a directory of the host) is mounted."""
SESSION_TIMEOUT_S = CONSUMER_DEFAULTS["session.timeout.ms"] / 1000
CPUS = 0.5
MEMORY_MIB = 768
PARTITIONS = Settings().partitions
"""The topic's partition count: compose's setup creates it with the default."""


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The host directory the workers append their attempts to (their user is not ours)."""
    directory = tmp_path_factory.mktemp("record")
    directory.chmod(0o777)
    return directory / "history.jsonl"


@pytest.fixture(scope="module")
def stack(record: Path) -> Iterator[Stack]:
    """docker-compose.yml with recording workers, worker-1 limited; up until the module ends."""
    recording = {
        "SCHEDULER_EXECUTOR": "scheduler.fleet.history:recording_executor",
        RECORD_ENV: f"{RECORD_DIR}/{record.name}",
    }
    mount = [f"{record.parent}:{RECORD_DIR}"]
    override = {
        "services": {
            "worker-1": {
                "environment": recording,
                "volumes": mount,
                "cpus": CPUS,
                "mem_limit": f"{MEMORY_MIB}m",
                "memswap_limit": f"{MEMORY_MIB}m",
            },
            "worker-2": {"environment": recording, "volumes": mount},
        }
    }
    faults = record.parent.parent / f"{record.parent.name}-faults.yml"
    faults.write_text(yaml.safe_dump(override))
    stack = Stack("docker-compose.yml", str(faults))
    try:
        stack.up()
        stack.wait_for_two_owners()
        yield stack
    finally:
        stack.down()


@pytest.fixture
def client(stack: Stack) -> Iterator[SchedulerClient]:
    """A producer on the stack's topic, from the host."""
    settings = Settings(
        log="kafka",
        kafka_bootstrap=stack.cli_env["SCHEDULER_KAFKA_BOOTSTRAP"],
        partitions=PARTITIONS,
    )
    log = build_log(settings)
    producer = SchedulerClient(log=log)
    try:
        yield producer
    finally:
        producer.close()
        log.close()


def owned_by(stack: Stack) -> set[str]:
    """The workers (compose services) that own partitions now."""
    return {w for w in WORKERS for owner in stack.owners() if owner.startswith(w)}


def wait_until_executed(record: Path, accepted: list[KeyTuple], timeout: float) -> HistoryReport:
    """Poll the record until every accepted key has a successful attempt; the report."""
    deadline = time.monotonic() + timeout
    while True:
        report = check_history(accepted, read_history(record))
        if not report.missing or time.monotonic() > deadline:
            return report
        time.sleep(1)


@pytest.mark.timeout(900)  # the first test of the module brings the stack up
def test_a_worker_held_to_a_cpu_and_memory_limit_runs_its_share(
    stack: Stack, client: SchedulerClient, record: Path
) -> None:
    worker = stack.container("worker-1")
    host = docker("inspect", "-f", "{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}}", worker)
    assert host == f"{int(CPUS * 1e9)} {MEMORY_MIB * 2**20}", "compose did not set the limits"
    # A worker that found no broker within its connect timeout at start exits and is restarted
    # (restart: unless-stopped); from here on it must neither die nor be killed.
    restarts = docker("inspect", "-f", "{{.RestartCount}}", worker)
    load = LoadGenerator(
        client, ordering_ids=20, rate_per_s=30, duration_s=20, lead_ms=1000, prefix="limited"
    ).start()
    accepted = load.join(timeout=120)
    assert accepted and not load.failed, load.failed[:3]
    report = wait_until_executed(record, accepted, timeout=180)
    print(f"\n[limited worker] {report.summary()}")
    assert report.missing == [], f"{report.summary()}\n{stack.logs()}"
    rows = [
        {
            "partition": partition_for(key[0].encode(), PARTITIONS),
            "ordering_id": key[0],
            "scheduled_ms": key[1],
            "uniqueness_key": key[2],
        }
        for key in accepted
    ]
    assert ran_on(rows, int(stack.ports["CASSANDRA_PORT"]), "scheduler") == set(WORKERS)
    state = docker("inspect", "-f", "{{.State.OOMKilled}} {{.RestartCount}}", worker)
    assert state == f"false {restarts}", "the limited worker was killed or restarted"


@pytest.mark.timeout(1200)
def test_killed_and_paused_workers_and_a_killed_broker_lose_no_acknowledged_task(
    stack: Stack, client: SchedulerClient, record: Path
) -> None:
    """worker-1 killed and started again, worker-2 paused past the session timeout (its
    partitions move to worker-1, and back once it resumes), then the broker killed and started
    again, all while tasks are sent: every acknowledged one ran. Sends may fail while the broker
    is down (they are not acknowledged); an attempt cut by the kill or the pause runs again."""
    load = LoadGenerator(
        client,
        ordering_ids=20,
        rate_per_s=30,
        duration_s=600,
        lead_ms=1000,
        data=some_sleep(),
        prefix="faults",
    ).start()
    try:
        time.sleep(5)
        docker("kill", stack.container("worker-1"))
        time.sleep(2)
        docker("start", stack.container("worker-1"))
        stack.wait_for_two_owners(timeout=180)

        paused = stack.container("worker-2")
        docker("pause", paused)
        try:
            wait_for(
                "worker-1 owning every partition while worker-2 is paused",
                lambda: owned_by(stack) == {"worker-1"},
                SESSION_TIMEOUT_S + 60,
                stack.logs,
            )
            time.sleep(5)  # worker-1 runs worker-2's share for a while
        finally:
            docker("unpause", paused)
        stack.wait_for_two_owners(timeout=180)

        kafka = stack.container("kafka")
        docker("kill", kafka)
        time.sleep(5)
        docker("start", kafka)
        stack.wait_for_two_owners(timeout=240)
        time.sleep(10)  # new work flows again
    finally:
        load.stop()
    accepted = load.join(timeout=180)
    report = wait_until_executed(record, accepted, timeout=300)
    print(
        f"\n[faults on containers] {report.summary()}; sends {load.sent}, "
        f"unacknowledged {len(load.failed)}"
    )
    assert len(accepted) > 0.5 * load.sent, "most sends happen while the broker is up"
    assert report.missing == [], f"{report.summary()}: {report.missing[:10]}\n{stack.logs()}"
    assert report.executed >= report.accepted == len(set(accepted))
