"""One run under faults on the replicated cluster: workers, a steady load, the faults of a
scenario, then the checker's verdict.

Each run has its own topic, keyspace and consumer group (uuid-suffixed), a record file the
workers' `recording_executor` appends to and a directory of worker logs; at the end the workers
stop, the proxies close, the topic is deleted and the keyspace dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

from scheduler.chaos.checker import ChaosReport, Fault, check
from scheduler.chaos.proxy import TcpProxy
from scheduler.client import SchedulerClient
from scheduler.engine.clock import now_ms
from scheduler.errors import TopicMissingError
from scheduler.fleet import RECORD_ENV, LoadGenerator, WorkerProcess, read_history
from scheduler.services import cluster
from scheduler.services.base import HOST

logger = logging.getLogger(__name__)

PARTITIONS = 8
START_TIMEOUT_S = 180.0


def _every_seventh_sleeps(sequence: int, ordering_id: str) -> dict[str, int]:
    """Every 7th task sleeps 300 ms, so some attempts are always in flight when a fault hits."""
    return {"sleep_ms": 300} if sequence % 7 == 0 else {}


class ChaosRun:
    """The workers, producer, proxies and fault record of one scenario run."""

    def __init__(self, directory: Path, scenario: str) -> None:
        suffix = uuid4().hex[:10]
        self.scenario = scenario
        directory = directory.resolve()  # the workers run in directories of their own
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.record = directory / "record.jsonl"
        self.topic = f"chaos-{suffix}"
        self.keyspace = f"chaos_{suffix}"
        self.group_id = f"chaos-{suffix}"
        self.env: dict[str, str] = {
            **cluster.worker_settings(),
            "SCHEDULER_CASSANDRA_KEYSPACE": self.keyspace,
            "SCHEDULER_TOPIC": self.topic,
            "SCHEDULER_GROUP_ID": self.group_id,
            "SCHEDULER_PARTITIONS": str(PARTITIONS),
            "SCHEDULER_POOL_SIZE": "8",
            "SCHEDULER_SHUTDOWN_DEADLINE_S": "10",
            "SCHEDULER_RETRY_BASE_DELAY_S": "0.2",
            "SCHEDULER_RETRY_MAX_DELAY_S": "1",
            "SCHEDULER_EXECUTOR": "scheduler.fleet:recording_executor",
            # Not the shell's: a worker given them refuses an executor other than `auto`.
            "SCHEDULER_PROGRAMS_FILE": "",
            "SCHEDULER_BATCH_FILE": "",
            "SCHEDULER_DATA_DIR": str(directory / "unused"),
            "SCHEDULER_LOG_LEVEL": "INFO",
            RECORD_ENV: str(self.record),
            # A worker that crashes in native code (it happened at start, with SIGSEGV and
            # an empty log) leaves the Python stack of every thread in its log, and a core
            # file in its directory (see `worker`).
            "PYTHONFAULTHANDLER": "1",
        }
        self.workers: list[WorkerProcess] = []
        self.proxies: list[TcpProxy] = []
        self.faults: list[Fault] = []
        self.load: LoadGenerator | None = None
        self._log: Any = None
        self._client: SchedulerClient | None = None

    # -- the fleet ----------------------------------------------------------------------------

    def worker(self, name: str, *, through_proxies: bool = False) -> WorkerProcess:
        """Start a worker; ``through_proxies`` makes it reach Kafka only through the proxies
        (started here on first use), so that `cut` can take Kafka away from it alone."""
        env = dict(self.env)
        if through_proxies:
            self._start_proxies()
            env["SCHEDULER_KAFKA_BOOTSTRAP"] = cluster.kafka_bootstrap(proxied=True)
        # Each start in a directory of its own, with core dumps enabled: a native crash (as the
        # SIGSEGV at a worker's start was, docs/reliability.md) leaves its native stack there.
        cores = self.directory / "cores" / f"{name}-{len(self.workers) + 1}"
        process = WorkerProcess(
            env, name=name, log_path=self.directory / f"{name}.log", core_dumps_in=cores
        )
        self.workers.append(process)
        return process

    def _start_proxies(self) -> None:
        if self.proxies:
            return
        for n in range(cluster.BROKERS):
            listen = (HOST, cluster.PROXY_PORT + n)
            target = (HOST, cluster.CHAOS_PORT + n)
            self.proxies.append(TcpProxy(listen, target).start())

    def client(self) -> SchedulerClient:
        """The producer, on a topic made here with replication factor 3."""
        if self._client is None:
            from scheduler.logs.kafka import KafkaTaskLog

            self._log = KafkaTaskLog(
                bootstrap_servers=cluster.kafka_bootstrap(),
                topic=self.topic,
                replication_factor=cluster.BROKERS,
            )
            self._log.ensure_topic(PARTITIONS)
            # The brokers of a fresh cluster learn of a new topic one after another: a metadata
            # read right after its leaders were seen may reach one that has not yet (a round
            # failed so, 1.4 s after the cluster's start).
            deadline = time.monotonic() + 30.0
            while self._client is None:
                try:
                    self._client = SchedulerClient(log=self._log)
                except TopicMissingError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        return self._client

    def start(self, workers: int = 2, *, proxied: int = 0) -> None:
        """Make the topic, start ``workers`` workers (the first ``proxied`` through the
        proxies) and wait until each owns a partition."""
        self.client()
        started = [
            self.worker(f"w{n}", through_proxies=n <= proxied) for n in range(1, workers + 1)
        ]
        for process in started:
            try:
                process.wait_until_owning(START_TIMEOUT_S)
            except RuntimeError:
                # A worker killed by a signal before it owned anything (as the SIGSEGV in
                # librdkafka's admin client did, docs/reliability.md) held no task yet: start it
                # once more, say so, and let a second crash fail the run.
                if process.returncode is None or process.returncode >= 0:
                    raise
                logger.warning(
                    "worker %s died with signal %d before owning partitions; starting it again",
                    process.name,
                    -process.returncode,
                )
                self.workers.remove(process)
                again = self.worker(process.name, through_proxies=process in started[:proxied])
                again.wait_until_owning(START_TIMEOUT_S)

    def start_load(self, duration_s: float, rate_per_s: float = 100) -> LoadGenerator:
        self.load = LoadGenerator(
            self.client(),
            ordering_ids=20,
            rate_per_s=rate_per_s,
            duration_s=duration_s,
            lead_ms=1000,
            data=_every_seventh_sleeps,
            prefix="chaos",
        ).start()
        return self.load

    # -- faults -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def fault(self, what: str, *, frozen_worker: int | None = None) -> Iterator[None]:
        """Record the block as a fault window named ``what`` (for the checker's reasons);
        ``frozen_worker`` is the pid of a worker the fault freezes (SIGSTOP)."""
        began = now_ms()
        try:
            yield
        finally:
            self.faults.append(Fault(what, began, now_ms(), frozen_worker))

    # -- the verdict --------------------------------------------------------------------------

    def finish(self, settle_s: float = 300.0) -> ChaosReport:
        """Wait for the load's futures, then until every acknowledged task ran (or nothing new
        ran for two minutes, or ``settle_s`` passed); the checker's report."""
        assert self.load is not None, "start_load first"
        acknowledged = self.load.join(timeout=300)
        sent = acknowledged + [key for key, _ in self.load.failed]
        wanted = set(acknowledged)
        deadline = time.monotonic() + settle_s
        progress = (0, time.monotonic())
        while time.monotonic() < deadline:
            done = {e.key for e in read_history(self.record) if e.ok}
            if wanted <= done:
                break
            if len(done) != progress[0]:
                progress = (len(done), time.monotonic())
            elif time.monotonic() - progress[1] > 120:
                break
            time.sleep(1)
        # Until now, not the load's end: a partition that stood still past the load (and ran
        # its backlog late) must show its whole pause.
        window = (self.load.started_ms or 0, now_ms())
        # Beside the record, so that a run's verdict can be recomputed from its directory.
        (self.directory / "faults.json").write_text(
            json.dumps([dataclasses.asdict(fault) for fault in self.faults], indent=1)
        )
        return check(
            self.scenario,
            sent=sent,
            acknowledged=acknowledged,
            executions=read_history(self.record),
            faults=self.faults,
            load_window=window,
        )

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.heal()
        running = [process for process in self.workers if process.alive]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, 18)  # SIGCONT: a paused worker must be able to stop
            process.process.terminate()
        for process in running:
            process.stop(40)
        for proxy in self.proxies:
            proxy.close()
        if self._client is not None:
            self._client.close()
        if self._log is not None:
            with contextlib.suppress(Exception):
                self._log.delete_topic()
            self._log.close()
        with contextlib.suppress(Exception):
            self._drop_keyspace()

    def _drop_keyspace(self) -> None:
        from scheduler.stores.cassandra import CassandraTaskStore

        store = CassandraTaskStore(
            hosts=[host for host, dc in cluster.CASSANDRA_NODES if dc == cluster.LOCAL_DC],
            port=cluster.CQL_PORT,
            keyspace=self.keyspace,
            consistency="LOCAL_QUORUM",
            local_dc=cluster.LOCAL_DC,
        )
        try:
            store.drop_keyspace()
        finally:
            store.close()
