"""Batch jobs built from `Settings` or beside an embedded engine: the `batch` route, its store,
and the events handler that records the end of a partition's run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.batch.engine import BatchExecutor
from scheduler.batch.launching import BATCH_EXECUTOR, control_task, ended_tasks, register_programs
from scheduler.batch.store import DEFAULT_NAME, BatchStore
from scheduler.engine.clock import now_ms

if TYPE_CHECKING:
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.executors.registry import RoutingExecutor
    from scheduler.programs.runtime import WorkerPrograms
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore


def open_batch_store(
    settings: Settings, store: TaskStore, *, create_schema: bool | None = None
) -> BatchStore:
    """The batch store beside the opened task store `store` (SQLite: the same file;
    Cassandra: the same keyspace and connection)."""
    batch: BatchStore
    if settings.store == "cassandra":
        from scheduler.stores.batch_cassandra import CassandraBatchStore
        from scheduler.stores.cassandra import CassandraTaskStore

        assert isinstance(store, CassandraTaskStore)
        batch = CassandraBatchStore(tasks=store)
    else:
        from scheduler.runtime import EMBEDDED_STORE_FILE, data_dir
        from scheduler.stores.batch_sqlite import SqliteBatchStore

        batch = SqliteBatchStore(path=str(data_dir(settings) / EMBEDDED_STORE_FILE))
    if create_schema is None:
        create_schema = settings.create_schema or settings.store == "sqlite"
    batch.open(create_schema=create_schema)
    return batch


@dataclass
class BatchRuntime:
    """The `batch` route of one worker and what it opened."""

    executor: BatchExecutor
    store: BatchStore
    poll_ms: int
    owns_store: bool = True

    def start(self) -> None:
        """Enqueue a `recover` (runs of RUNNING partitions that ended or were never launched
        while no worker watched) and join the file's poll chain."""
        executor = self.executor
        now = now_ms()
        executor.client.schedule_task(
            control_task(executor.name, "recover", now, f"recover:{now}")
        ).result(executor.timeout_s)
        stored = self.store.configuration(executor.name)
        if stored is None:
            executor.schedule_poll(None)
        else:
            from scheduler.batch.config import parse_configuration

            executor.schedule_poll(parse_configuration(stored.text))

    def close(self) -> None:
        if self.owns_store:
            self.store.close()


def attach(
    router: RoutingExecutor,
    programs: WorkerPrograms,
    store: BatchStore,
    *,
    name: str = DEFAULT_NAME,
    file: str | Path | None = None,
    poll_s: float = 120.0,
    clock: Callable[[], int] = now_ms,
) -> BatchRuntime:
    """Add the `batch` route to `router` over `programs` (its catalog gets the batch programs,
    its subscriber the handler of runs' ends). Call `start` once the engine runs."""
    register_programs(programs.executor.catalog)
    executor = BatchExecutor(
        store=store,
        runs=programs.runs,
        client=programs.client,
        name=name,
        file=file,
        clock=clock,
        poll_ms=int(poll_s * 1000),
    )
    router.routes[BATCH_EXECUTOR] = executor
    if programs.subscriber is not None:
        programs.subscriber.register(ended_tasks)
    return BatchRuntime(executor, store, int(poll_s * 1000))


def embedded_batch(
    embedded: EmbeddedScheduler,
    router: RoutingExecutor,
    programs: WorkerPrograms,
    *,
    name: str = DEFAULT_NAME,
    file: str | Path | None = None,
    poll_s: float = 120.0,
    clock: Callable[[], int] = now_ms,
) -> BatchRuntime:
    """Batch jobs in one process, their store in `embedded`'s `store.db` (see `attach`)."""
    from scheduler.stores.batch_sqlite import SqliteBatchStore

    store = SqliteBatchStore(path=str(embedded.data_dir / "store.db"))
    store.open()
    return attach(router, programs, store, name=name, file=file, poll_s=poll_s, clock=clock)


def worker_batch(
    settings: Settings, router: RoutingExecutor, programs: WorkerPrograms, store: TaskStore
) -> BatchRuntime:
    """The `batch` route of a worker from `settings` (see `attach`)."""
    return attach(
        router,
        programs,
        open_batch_store(settings, store),
        name=settings.batch_name,
        file=settings.batch_file,
        poll_s=settings.batch_poll_s,
    )
