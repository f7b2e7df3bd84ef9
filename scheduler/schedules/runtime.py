"""Schedules built from `Settings` (a worker, the CLI) or added to an embedded engine: the
schedule store beside the task store, the `schedules` executor route, and the events handler
registered with the programs' subscriber."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from scheduler.schedules.abc import ScheduleStore
from scheduler.schedules.executor import ScheduleExecutor
from scheduler.schedules.subscriber import event_handler
from scheduler.schedules.tasks import SCHEDULES_EXECUTOR

if TYPE_CHECKING:
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.executors.abc import Executor
    from scheduler.programs.runtime import WorkerPrograms
    from scheduler.schedules.client import SchedulesClient
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore
    from scheduler.stores.cassandra import CassandraTaskStore


@contextmanager
def connect_schedules(
    settings: Settings | None = None,
    *,
    wait_s: float | None = 30.0,
    writes: bool = True,
    adds: bool = False,
    store: TaskStore | None = None,
) -> Iterator[SchedulesClient]:
    """A `SchedulesClient` for the deployment `settings` describe (default: the workers'
    `SCHEDULER_*` variables over the `$SCHEDULER_CONFIG` file), as `scheduler schedules` uses
    it; everything it opened is closed on leaving the `with`.

    Its changes wait up to `wait_s` seconds (None or 0: not at all) for a worker with programs
    to apply them. `writes=False` opens no log and reads no programs file (a listing); `adds`
    (create, apply) may begin an embedded data directory nothing ran in, as `enqueue` does.
    `store`: the deployment's task store, opened already (left open), instead of its own."""
    from scheduler.config import load_settings
    from scheduler.programs.runtime import load_catalog
    from scheduler.runtime import open_existing_store, open_sender
    from scheduler.schedules.client import SchedulesClient

    settings = settings if settings is not None else load_settings()
    with ExitStack() as stack:
        if store is None:
            store = open_existing_store(settings, adds=adds)
            stack.callback(store.close)
        schedule_store = open_schedule_store(
            settings, store, create_schema=settings.store == "sqlite"
        )
        stack.callback(schedule_store.close)
        tasks = open_sender(stack, settings, adds=adds) if writes else None
        # Only changes check program names: a listing reads no programs file (one being moved
        # or edited does not hide the schedules).
        reads_programs = writes and settings.programs_file is not None
        catalog = load_catalog(settings) if reads_programs else None
        yield SchedulesClient(
            store=schedule_store, client=tasks, catalog=catalog, wait_s=wait_s or None
        )


def open_schedule_store(
    settings: Settings, store: TaskStore, *, create_schema: bool | None = None
) -> ScheduleStore:
    """The schedule store beside the opened task store `store` (see `runtime.open_beside`)."""
    from scheduler.runtime import open_beside

    def cassandra(tasks: CassandraTaskStore) -> ScheduleStore:
        from scheduler.stores.schedules_cassandra import CassandraScheduleStore

        return CassandraScheduleStore(tasks=tasks)

    def sqlite(path: str) -> ScheduleStore:
        from scheduler.stores.schedules_sqlite import SqliteScheduleStore

        return SqliteScheduleStore(path=path)

    return open_beside(
        settings, store, cassandra=cassandra, sqlite=sqlite, create_schema=create_schema
    )


def an_enabled_schedule(settings: Settings, store: TaskStore) -> str | None:
    """The name of one enabled schedule of the deployment of the opened task store `store`, or
    None if it has none; a deployment that never had schedules has no tables for them, and
    none are made here."""
    if settings.store == "cassandra":
        from scheduler.stores.cassandra import CassandraTaskStore
        from scheduler.stores.schedules_cassandra import CassandraScheduleStore

        assert isinstance(store, CassandraTaskStore)
        if not CassandraScheduleStore(tasks=store).tables_exist():
            return None
    schedules = open_schedule_store(settings, store, create_schema=False)
    try:
        page = schedules.list_listed(status="ENABLED", limit=1)
    finally:
        schedules.close()
    return page[0].name if page else None


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
