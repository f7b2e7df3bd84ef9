"""`scheduler worker`: one member of the worker group, running until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import click

from scheduler.cli.context import CliState, pass_state
from scheduler.engine.collector import pace_for_a_worker
from scheduler.errors import ConfigurationError

if TYPE_CHECKING:
    from scheduler.batch.runtime import BatchRuntime
    from scheduler.executors.abc import Executor
    from scheduler.logs.abc import TaskLog
    from scheduler.programs.runtime import WorkerPrograms
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore

logger = logging.getLogger("scheduler.cli.worker")


@click.command()
@click.option(
    "--executor",
    metavar="NAME",
    help="What runs tasks: noop, spark, command, spark-submit or package.module:callable "
    "(setting executor).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    help="Serve Prometheus metrics at http://HOST:PORT/metrics, and health probes at "
    "/healthz and /readyz (setting metrics_port).",
)
@click.option(
    "--metrics-host",
    metavar="ADDRESS",
    help="Address the metrics port listens on: 0.0.0.0 (every interface, the default) or "
    "127.0.0.1 (this host only) (setting metrics_host).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory of the embedded log and the SQLite store (setting data_dir, default "
    ".scheduler).",
)
@click.option("--client-id", help="This worker's name in the group (setting client_id).")
@click.option(
    "--api",
    "api_address",
    metavar="[HOST:]PORT",
    is_flag=False,
    flag_value="",
    help="Serve the REST API and the dashboard from this worker too, on HOST:PORT (alone: on "
    "the settings api_host and api_port; setting worker_api).",
)
@pass_state
def worker(
    state: CliState,
    executor: str | None,
    metrics_port: int | None,
    metrics_host: str | None,
    data_dir: Path | None,
    client_id: str | None,
    api_address: str | None,
) -> None:
    """Run tasks when they are due, for the partitions the group assigns to this process.

    Start several workers with the same group id (setting group_id) to share the partitions;
    in the embedded mode (the default) one worker owns them all. SIGTERM or Ctrl-C stops
    gracefully: no new task starts, running ones get shutdown_deadline_s to finish, and
    everything accepted stays in the store for the next start. A second Ctrl-C stops at once:
    running tasks are cancelled and run again on the next start.
    """
    from scheduler.health import Health, serve
    from scheduler.runtime import (
        build_executor,
        build_log,
        describe,
        new_store_check,
        open_store,
        partition_count_check,
        stop_left_running_commands,
        watch_left_running_commands,
    )
    from scheduler.worker import Worker

    settings = state.settings(
        executor=executor,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        data_dir=data_dir,
        client_id=client_id,
        **_api_overrides(api_address),
    )
    _check_routes(settings)
    with ExitStack() as stack:
        built: list[Worker] = []
        if settings.metrics_port is not None:
            # First: probes answer "starting" while Spark, Kafka and Cassandra are connected.
            stall_s = settings.health_stall_s
            server = serve(
                settings.metrics_port,
                lambda: built[0].health(stall_s) if built else Health("starting", 0.0),
                host=settings.metrics_host,
            )
            stack.callback(server.server_close)
            stack.callback(server.shutdown)
        task_executor = build_executor(settings, set_by=state.origin("executor"))
        stop_left_running_commands(settings)  # before their tasks run again
        # Closed last: by then this worker's commands ended or were cancelled.
        stack.callback(watch_left_running_commands(settings))
        stop = getattr(task_executor, "stop", None)
        if callable(stop):
            stack.callback(stop)
        log = build_log(settings)
        stack.callback(log.close)
        store = open_store(settings)
        stack.callback(store.close)
        new_store_check(log, store, settings)  # before the check pins the count in it
        partition_count_check(log, store, settings.partitions)
        programs = _with_programs(settings, task_executor, log, store)
        if programs is not None:
            stack.callback(programs.close)
        else:
            _warn_enabled_schedules(settings, store)
        batch = _with_batch(settings, task_executor, programs, store)
        if batch is not None:
            stack.callback(batch.close)
        running = Worker(
            log=log,
            store=store,
            executor=task_executor,
            settings=settings.engine_settings(),
            group_id=settings.group_id,
            client_id=settings.client_id,
        )
        built.append(running)
        if settings.worker_api:
            from scheduler.api.serve import ApiThread
            from scheduler.cli.api import warn_without_tokens

            warn_without_tokens(settings)
            # Last: its backends are opened after the worker's made the store and the topic.
            api = ApiThread(settings).start()
            stack.callback(api.stop)

        def banner() -> None:
            # Once started: a worker whose consumer is refused prints only its error.
            click.echo(
                f"worker {running.client_id} in group {settings.group_id!r}: "
                f"{describe(settings)}; executor {settings.executor}, pool of {settings.pool_size}"
            )
            if settings.executor == "auto":
                click.echo(_workflows_line(settings, programs))
            if settings.metrics_port is not None:
                base = f"http://{settings.metrics_host}:{settings.metrics_port}"
                click.echo(f"metrics at {base}/metrics, health at {base}/healthz and /readyz")
            if settings.worker_api:
                from scheduler.api.serve import url

                click.echo(f"API and dashboard at {url(settings)}")
            click.echo("stop with Ctrl-C or SIGTERM")

        if programs is not None and programs.subscriber is not None:
            programs.subscriber.start()
        if batch is not None:
            batch.start()
        # Start-up is done: what it made stays. Cassandra's driver leaves cycles per request.
        pace_for_a_worker(cyclic_requests=settings.store == "cassandra")
        running.run_until_signalled(on_started=banner)
    click.echo(f"worker {running.client_id} stopped")


def _warn_enabled_schedules(settings: Settings, store: TaskStore) -> None:
    """Say it when a worker that runs no schedules joins a deployment that has enabled ones:
    it takes its share of their tick and fire tasks from the group, and fails them for good
    (executor `auto`: no `schedules` route) or runs them as its own work (any other executor),
    so those schedules stop firing. Not refused: `scheduler example run` leaves its hourly
    schedule enabled in the default data directory, where the README's plain worker runs next."""
    from scheduler.schedules.runtime import an_enabled_schedule

    try:
        # Without creating tables: a worker that runs only tasks makes none of the schedules'
        # (nor needs the permission to), and a deployment without them has no schedule.
        enabled = an_enabled_schedule(settings, store)
    except Exception as error:  # a look for a warning: it never stops the worker
        logger.debug("no schedules read (%s): none to warn of", error)
        return
    if enabled is None:
        return
    how = (
        "fails them for good (executor 'auto' without programs_file has no route for them)"
        if settings.executor == "auto"
        else f"runs them as its own work (executor {settings.executor!r})"
    )
    logger.warning(
        "this deployment has enabled schedules (%s and maybe more), and this worker has no "
        "programs_file: it takes its share of their fire tasks and %s, so they stop firing. "
        "Start every worker with SCHEDULER_PROGRAMS_FILE set to the same programs file (and "
        "executor auto), or disable those schedules (scheduler schedules list --status enabled)",
        enabled,
        how,
    )


def _workflows_line(settings: Settings, programs: WorkerPrograms | None) -> str:
    """What the worker runs beyond tasks: a schedule's change, run or batch job sent to a worker
    without them fails there, so its banner says so before any does."""
    if programs is None:
        return (
            "no programs_file or batch_file: tasks only; schedules, runs and batch jobs are "
            "not run here (set SCHEDULER_PROGRAMS_FILE to run them)"
        )
    names = programs.executor.catalog.names()
    declared = (
        f"programs from {settings.programs_file} ({', '.join(names) or 'none yet'})"
        if settings.programs_file is not None
        else "no programs_file (batch jobs' commands only)"
    )
    batch = f"; batch jobs from {settings.batch_file}" if settings.batch_file is not None else ""
    return f"schedules and runs: {declared}{batch}"


def _api_overrides(address: str | None) -> dict[str, object]:
    """The settings `--api [HOST:]PORT` sets: none without it; `worker_api` alone for `--api`."""
    if address is None:
        return {}
    overrides: dict[str, object] = {"worker_api": True}
    if address:
        host, _, port = address.rpartition(":")
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise click.BadParameter(
                f"{address!r} is not [HOST:]PORT (e.g. 127.0.0.1:8080 or 8080)",
                param_hint="--api",
            )
        overrides["api_port"] = int(port)
        if host:
            overrides["api_host"] = host.strip("[]")
    return overrides


def _check_routes(settings: Settings) -> None:
    """Refuse a worker whose files name work its executor cannot route: programs and batch
    jobs run through `auto`'s routes, and a worker started anyway would fail every run and
    every batch load permanently, each with an error about an unknown executor."""
    named = [
        name
        for name, value in (
            ("programs_file", settings.programs_file),
            ("batch_file", settings.batch_file),
        )
        if value is not None
    ]
    if named and settings.executor != "auto":
        raise ConfigurationError(
            f"{' and '.join(named)} {'is' if len(named) == 1 else 'are'} set, but executor "
            f"{settings.executor!r} runs only its own tasks: programs, schedules and batch jobs "
            "run through executor 'auto' (the default). Set SCHEDULER_EXECUTOR=auto (or drop "
            f"--executor), or unset {' and '.join(named)} on this worker"
        )


def _with_programs(
    settings: Settings, executor: Executor, log: TaskLog, store: TaskStore
) -> WorkerPrograms | None:
    """Add the `workflow` route (programs and runs) to a routing executor (`auto`) when a
    programs file is set. Other executors run what they are given and nothing else; without
    programs a worker neither makes the events topic nor reads it (its ACLs stay as they were)."""
    from scheduler.executors.registry import RoutingExecutor
    from scheduler.programs.runtime import worker_programs

    if not isinstance(executor, RoutingExecutor) or (
        settings.programs_file is None and settings.batch_file is None
    ):
        return None
    programs = worker_programs(settings, log=log, store=store, routes=executor.routes)
    executor.routes["workflow"] = programs.executor
    from scheduler.schedules.runtime import worker_schedules

    programs.also_close.append(worker_schedules(settings, programs, store, executor.routes).close)
    return programs


def _with_batch(
    settings: Settings, executor: Executor, programs: WorkerPrograms | None, store: TaskStore
) -> BatchRuntime | None:
    """Add the `batch` route (batch jobs, docs/batch-jobs.md) beside the programs when a batch
    file is set."""
    from scheduler.batch.runtime import worker_batch
    from scheduler.executors.registry import RoutingExecutor

    if settings.batch_file is None:
        return None
    if programs is None or not isinstance(executor, RoutingExecutor):
        return None  # not with executor 'auto', which `_check_routes` asked for
    if programs.subscriber is None:
        logger.warning(
            "batch_file is set but events_subscriber is off: this worker launches partitions "
            "but never records their ends; turn events_subscriber on"
        )
    return worker_batch(settings, executor, programs, store)
