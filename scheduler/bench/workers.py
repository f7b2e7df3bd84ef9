"""Backends and worker processes for the scenarios: a fresh topic/keyspace (or data dir) per run.

Workers are real `scheduler worker` subprocesses (`scheduler.fleet.WorkerProcess`), configured
through the same SCHEDULER_* variables a user would set, so the bench process is only the
producer and the observer. `twin_main` is the one exception: two `Worker` objects in one process
on the embedded backends, because the embedded log admits one worker process per group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

from scheduler import speedups
from scheduler.bench.common import DISTRIBUTED, BenchOptions
from scheduler.bench.probe import PROBE_ENV
from scheduler.config import CONFIG_ENV
from scheduler.fleet import WorkerProcess

PARTITIONS = 16
START_TIMEOUT_S = 120.0


@dataclass
class Backend:
    """One benchmark run's topic and keyspace (or data dir), and its worker processes."""

    kind: str
    env: dict[str, str]
    directory: Path
    probe: Path
    log: Any = None
    workers: list[WorkerProcess] = field(default_factory=list)

    def start_worker(self, name: str, *, twin: bool = False, **env: str) -> WorkerProcess:
        """`scheduler worker` (or, with `twin`, two Workers in one process) with this run's env."""
        kind = TwinProcess if twin else WorkerProcess
        process = kind({**self.env, **env}, name=name, log_path=self.directory / f"{name}.log")
        self.workers.append(process)
        return process

    def wait_assigned(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until every live worker owns partitions and together they own them all."""
        deadline = time.monotonic() + timeout_s
        for worker in self.workers:
            if worker.alive:
                worker.wait_until_owning(max(1.0, deadline - time.monotonic()))
        while time.monotonic() < deadline:
            owned = set().union(*(w.assigned_partitions() for w in self.workers if w.alive))
            if len(owned) >= PARTITIONS:
                return
            time.sleep(0.1)
        raise TimeoutError(f"workers own {sorted(owned)} of {PARTITIONS} partitions")

    def stop_workers(self) -> None:
        for worker in self.workers:
            if worker.alive:
                worker.stop(60)
        self.workers = []


class TwinProcess(WorkerProcess):
    """`twin_main` in a child process, handled like a `WorkerProcess`."""

    def __init__(self, env: Mapping[str, str], *, name: str, log_path: Path) -> None:
        self.name = name
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in wait()
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from scheduler.bench.workers import twin_main; twin_main()"],
            env={**os.environ, **env, "SCHEDULER_CLIENT_ID": name},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


@contextmanager
def backend(
    kind: str, options: BenchOptions, label: str, *, executor: str | None = None
) -> Iterator[Backend]:
    """A fresh backend for one run; workers are stopped and topic/keyspace dropped after."""
    suffix = uuid4().hex[:8]
    directory = options.scratch / f"{label}-{kind}-{suffix}"
    directory.mkdir(parents=True)
    probe = directory / "probe"
    env = {
        "SCHEDULER_PARTITIONS": str(PARTITIONS),
        "SCHEDULER_EXECUTOR": executor or "scheduler.bench.probe:probe_executor",
        "SCHEDULER_DATA_DIR": str(directory / "data"),
        "SCHEDULER_LOG_LEVEL": "INFO",
        # The engine's rate, not logging's: a line per task halves it (docs/benchmarks.md).
        "SCHEDULER_TASK_LOG_LEVEL": "WARNING",
        "SCHEDULER_SHUTDOWN_DEADLINE_S": "5",
        "SCHEDULER_TOPIC": f"bench-{suffix}",
        "SCHEDULER_GROUP_ID": f"bench-{suffix}",
        PROBE_ENV: str(probe),
        "SCHEDULER_FLEET_RECORD": str(directory / "record.jsonl"),
        # Not the shell's: with the bench's own executors a worker given them refuses to start;
        # the scenarios that run programs or batch jobs set their own.
        "SCHEDULER_PROGRAMS_FILE": "",
        "SCHEDULER_BATCH_FILE": "",
    }
    if options.config is not None:
        env[CONFIG_ENV] = str(options.config.resolve())
    settings = options.settings
    if kind == DISTRIBUTED:
        env |= {
            "SCHEDULER_LOG": "kafka",
            "SCHEDULER_STORE": "cassandra",
            "SCHEDULER_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
            "SCHEDULER_CASSANDRA_HOSTS": ",".join(settings.cassandra_hosts),
            "SCHEDULER_CASSANDRA_PORT": str(settings.cassandra_port),
            "SCHEDULER_CASSANDRA_KEYSPACE": f"bench_{suffix}",
            "SCHEDULER_CASSANDRA_CONSISTENCY": "ONE",
        }
    else:
        env |= {"SCHEDULER_LOG": "embedded", "SCHEDULER_STORE": "sqlite"}
    run = Backend(kind, env, directory, probe)
    run.log = open_log(run)
    try:
        yield run
    finally:
        run.stop_workers()
        close_backend(run)


def run_settings(run: Backend) -> Any:
    """The `Settings` a worker of this run sees: the run's variables over the settings file."""
    from scheduler.config import load_settings

    not_settings = (PROBE_ENV, "SCHEDULER_FLEET_RECORD", CONFIG_ENV, speedups.ENV)
    values: dict[str, Any] = {
        key.removeprefix("SCHEDULER_").lower(): value
        for key, value in run.env.items()
        if key.startswith("SCHEDULER_") and key not in not_settings
    }
    return load_settings(run.env.get(CONFIG_ENV), values)


def open_log(run: Backend) -> Any:
    """The run's task log with its topic created (the producer side)."""
    from scheduler.runtime import build_log, topic_partition_check

    log = build_log(run_settings(run))
    topic_partition_check(log, PARTITIONS)
    return log


def close_backend(run: Backend) -> None:
    """Best effort: a server restarting under us must not hide the measured numbers."""
    import logging

    try:
        if run.kind == DISTRIBUTED:
            run.log.delete_topic()
        run.log.close()
    except Exception as error:
        logging.getLogger(__name__).warning("could not delete topic: %s", error)
    if run.kind == DISTRIBUTED:
        from scheduler.runtime import build_store

        store = build_store(run_settings(run))
        try:
            store.drop_keyspace()  # type: ignore[attr-defined]
        except Exception as error:
            logging.getLogger(__name__).warning("could not drop keyspace: %s", error)
        finally:
            store.close()


def twin_main() -> None:
    """Two `Worker`s in one process on the embedded backends, until SIGTERM (`python -m`)."""
    from scheduler.config import load_settings
    from scheduler.logging_setup import configure_logging
    from scheduler.runtime import build_executor, build_log, open_store, partition_count_check
    from scheduler.worker import Worker

    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format, task_level=settings.task_log_level)
    log = build_log(settings)
    store = open_store(settings)
    partition_count_check(log, store, settings.partitions)
    executor = build_executor(settings)
    workers = [
        Worker(
            log=log,
            store=store,
            executor=executor,
            settings=settings.engine_settings(),
            group_id=settings.group_id,
            client_id=f"{settings.client_id}-{n}",
        )
        for n in range(2)
    ]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    for worker in workers:
        worker.start()
    stop.wait()
    for worker in workers:
        worker.stop()
    store.close()
    log.close()
