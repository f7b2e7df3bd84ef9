"""Schedules built from `Settings` (a worker, the CLI) or added to an embedded engine: the
schedule store beside the task store, the `schedules` executor route, and the events handler
registered with the programs' subscriber."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import TYPE_CHECKING

from scheduler.schedules.abc import ScheduleStore
from scheduler.schedules.executor import ScheduleExecutor
from scheduler.schedules.subscriber import event_handler
from scheduler.schedules.tasks import SCHEDULES_EXECUTOR

if TYPE_CHECKING:
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.executors.abc import Executor
    from scheduler.programs.runtime import WorkerPrograms
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore


def open_schedule_store(
    settings: Settings, store: TaskStore, *, create_schema: bool | None = None
) -> ScheduleStore:
    """The schedule store beside the opened task store `store` (SQLite: the same file;
    Cassandra: the same keyspace and connection)."""
    schedules: ScheduleStore
    if settings.store == "cassandra":
        from scheduler.stores.cassandra import CassandraTaskStore
        from scheduler.stores.schedules_cassandra import CassandraScheduleStore

        assert isinstance(store, CassandraTaskStore)
        schedules = CassandraScheduleStore(tasks=store)
    else:
        from scheduler.runtime import EMBEDDED_STORE_FILE, data_dir
        from scheduler.stores.schedules_sqlite import SqliteScheduleStore

        schedules = SqliteScheduleStore(path=str(data_dir(settings) / EMBEDDED_STORE_FILE))
    if create_schema is None:
        create_schema = settings.create_schema or settings.store == "sqlite"
    schedules.open(create_schema=create_schema)
    return schedules


def attach_schedules(
    programs: WorkerPrograms, store: ScheduleStore, routes: MutableMapping[str, Executor]
) -> ScheduleExecutor:
    """Add the `schedules` route to `routes` and its events handler to the programs'
    subscriber (if it runs one)."""
    executor = ScheduleExecutor(store=store, runs=programs.runs, client=programs.client)
    routes[SCHEDULES_EXECUTOR] = executor
    if programs.subscriber is not None:
        programs.subscriber.register(event_handler(store))
    return executor


def worker_schedules(
    settings: Settings,
    programs: WorkerPrograms,
    store: TaskStore,
    routes: MutableMapping[str, Executor],
) -> ScheduleStore:
    """Schedules in a worker with programs; returns the opened store to close after it."""
    schedules = open_schedule_store(settings, store)
    attach_schedules(programs, schedules, routes)
    return schedules


def embedded_schedules(
    embedded: EmbeddedScheduler,
    programs: WorkerPrograms,
    routes: MutableMapping[str, Executor],
) -> ScheduleExecutor:
    """Schedules in one process, after `embedded_programs`: the store in its `store.db`.
    Call before `start`; `executor.store.close()` after stopping."""
    from scheduler.stores.schedules_sqlite import SqliteScheduleStore

    store = SqliteScheduleStore(path=str(embedded.data_dir / "store.db"))
    store.open()
    return attach_schedules(programs, store, routes)
