"""Programs and runs built from `Settings`: the catalog, the run store, the events topic, and
the `workflow` route a worker adds to its executor."""

from __future__ import annotations

import getpass
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.programs.catalog import ProgramCatalog, ProgramsFile
from scheduler.programs.events import EventPublisher, events_topic
from scheduler.settings import Settings

if TYPE_CHECKING:
    from scheduler.client import SchedulerClient
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.executors.abc import Executor
    from scheduler.executors.registry import RoutingExecutor
    from scheduler.logs.abc import TaskLog
    from scheduler.programs.abc import RunStore
    from scheduler.programs.subscriber import EventSubscriber
    from scheduler.programs.workflow import WorkflowExecutor
    from scheduler.stores.abc import TaskStore
    from scheduler.stores.cassandra import CassandraTaskStore

LATE_RUN_TASKS_S = 10 * 365 * 86_400.0
"""The grace window of the workflow's own client: a launch re-executed long after its first try
enqueues the run task at the run's creation time again (the same key), however old."""


_PROGRAM_ROUTES = ("spark", "spark-submit", "command")
"""The executor routes programs run on."""


def load_catalog(settings: Settings) -> ProgramCatalog:
    """The programs of `settings.programs_file` (none without one), read again when the file
    changes (`ProgramsFile`)."""
    if settings.programs_file is None:
        return ProgramCatalog()
    return ProgramsFile(settings.programs_file)


def open_run_store(
    settings: Settings, store: TaskStore, *, create_schema: bool | None = None
) -> RunStore:
    """The run store beside the opened task store `store` (see `runtime.open_beside`), keeping
    runs for `settings.run_retention_s`."""
    from scheduler.runtime import open_beside

    def cassandra(tasks: CassandraTaskStore) -> RunStore:
        from scheduler.stores.runs_cassandra import CassandraRunStore

        return CassandraRunStore(tasks=tasks, retention_s=settings.run_retention_s)

    def sqlite(path: str) -> RunStore:
        from scheduler.stores.runs_sqlite import SqliteRunStore

        return SqliteRunStore(path=path, retention_s=settings.run_retention_s)

    return open_beside(
        settings, store, cassandra=cassandra, sqlite=sqlite, create_schema=create_schema
    )


def build_events_log(settings: Settings) -> TaskLog:
    """The events topic on the same log as the tasks (`<topic>-events`)."""
    from scheduler.runtime import build_log

    return build_log(settings.model_copy(update={"topic": events_topic(settings.topic)}))


def operator_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


@dataclass
class WorkerPrograms:
    """What a worker runs programs with; `close` releases what it opened."""

    executor: WorkflowExecutor
    subscriber: EventSubscriber | None
    publisher: EventPublisher
    events_log: TaskLog
    runs: RunStore
    client: SchedulerClient

    closed: bool = False
    also_close: list[Callable[[], None]] = field(default_factory=list)
    """What the layers on programs (schedules) opened, closed after the subscriber stops."""

    def stop_subscriber(self) -> None:
        """Stop reading events, so that no new task comes of them; what tasks still run keep
        the run store and the publisher (an embedded engine stops first, then `close`)."""
        if self.subscriber is not None:
            self.subscriber.stop()

    def close(self) -> None:
        """Stop the subscriber and release what was opened (once; later calls do nothing).
        Close only once no task of the engine can still run: tasks write runs and publish."""
        if self.closed:
            return
        self.closed = True
        self.stop_subscriber()
        for release in self.also_close:
            release()
        self.publisher.close()
        self.client.close()
        self.runs.close()
        self.events_log.close()


def worker_programs(
    settings: Settings,
    *,
    log: TaskLog,
    store: TaskStore,
    routes: Mapping[str, Executor],
) -> WorkerPrograms:
    """The `workflow` route of a worker (over the program `routes`), its run store, its events
    publisher, and the events subscriber if `settings.events_subscriber` (not started)."""
    from scheduler.client import SchedulerClient
    from scheduler.executors.registry import RoutingExecutor
    from scheduler.programs.subscriber import EventSubscriber
    from scheduler.programs.workflow import WorkflowExecutor

    catalog = load_catalog(settings)
    runs = open_run_store(settings, store)
    events_log = build_events_log(settings)
    events_log.ensure_topic(settings.partitions)
    publisher = EventPublisher(events_log)
    client = SchedulerClient(log=log, grace_window_s=LATE_RUN_TASKS_S)
    program_routes = {k: v for k, v in routes.items() if k in _PROGRAM_ROUTES}
    executor = WorkflowExecutor(
        catalog=catalog,
        runs=runs,
        client=client,
        programs=RoutingExecutor(program_routes, default=next(iter(program_routes)))
        if program_routes
        else _no_programs,
        events=publisher,
    )
    subscriber = None
    if settings.events_subscriber:
        subscriber = EventSubscriber(
            log=events_log,
            client=client,
            group_id=f"{settings.group_id}-events",
            client_id=f"{settings.client_id or 'worker'}-events",
        )
    return WorkerPrograms(executor, subscriber, publisher, events_log, runs, client)


def _no_programs(task: object, context: object) -> None:
    from scheduler.errors import UnknownExecutorError

    raise UnknownExecutorError(
        "this worker's executor has no spark, spark-submit or command route to run programs "
        "on; run it with SCHEDULER_EXECUTOR=auto"
    )


def embedded_programs(
    embedded: EmbeddedScheduler,
    router: RoutingExecutor,
    catalog: ProgramCatalog,
    *,
    run_retention_s: float = 30 * 86_400.0,
    group_id: str = "scheduler-workers-events",
) -> WorkerPrograms:
    """Programs in one process: the `workflow` route added to `router` (the executor
    `embedded` runs), runs in its `store.db`, events in its `log.db`. Call before `start`;
    start the subscriber (if handlers need events) after it, and `close` it before `stop`."""
    from scheduler.client import SchedulerClient
    from scheduler.executors.registry import RoutingExecutor
    from scheduler.logs.embedded import EmbeddedTaskLog
    from scheduler.programs.subscriber import EventSubscriber
    from scheduler.programs.workflow import WorkflowExecutor
    from scheduler.stores.runs_sqlite import SqliteRunStore

    runs = SqliteRunStore(path=str(embedded.data_dir / "store.db"), retention_s=run_retention_s)
    runs.open()
    events_log = EmbeddedTaskLog(
        path=str(embedded.data_dir / "log.db"), topic=events_topic(embedded.log.topic)
    )
    events_log.ensure_topic(embedded.log.partition_count())
    publisher = EventPublisher(events_log)
    client = SchedulerClient(log=embedded.log, grace_window_s=LATE_RUN_TASKS_S)
    program_routes = {k: v for k, v in router.routes.items() if k in _PROGRAM_ROUTES}
    executor = WorkflowExecutor(
        catalog=catalog,
        runs=runs,
        client=client,
        programs=RoutingExecutor(program_routes, default=next(iter(program_routes)))
        if program_routes
        else _no_programs,
        events=publisher,
    )
    router.routes["workflow"] = executor
    subscriber = EventSubscriber(
        log=events_log, client=embedded.client, group_id=group_id, client_id="embedded-events"
    )
    return WorkerPrograms(executor, subscriber, publisher, events_log, runs, client)
