"""`scheduler programs`, `scheduler runs` and `scheduler events`: the programs a deployment
declares, their runs, and the events topic.

Reads go to the run store directly. Starting and killing travel on the task log like every
change does (`scheduler.programs.operator`, which the REST API uses too).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import click

from scheduler.cli.context import CliState, backends, echo_err, pass_state
from scheduler.cli.keys import iso
from scheduler.cli.output import echo_json, echo_table
from scheduler.programs.model import Program, Run, RunStatus

if TYPE_CHECKING:
    from scheduler.logs.abc import TaskLog
    from scheduler.programs.abc import RunStore
    from scheduler.programs.catalog import ProgramCatalog
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore

STATUSES = [status.value for status in RunStatus]
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


@click.group()
def programs() -> None:
    """The programs runs are made of, as the programs file declares them (setting
    programs_file)."""


@programs.command("list")
@JSON
@pass_state
def list_programs(state: CliState, as_json: bool) -> None:
    """Every declared program, by name."""
    from scheduler.programs.runtime import load_catalog

    settings = state.settings()
    catalog = load_catalog(settings)
    if as_json:
        echo_json([_program_dict(p) for p in catalog.programs()])
        return
    echo_table(
        ["PROGRAM", "KIND", "DESCRIPTION"],
        [(p.name, p.kind, p.description) for p in catalog.programs()],
        empty=(
            "no programs: set programs_file (SCHEDULER_PROGRAMS_FILE) to a TOML file of "
            "[programs.NAME] tables (docs/programs-and-runs.md)"
            if settings.programs_file is None
            else f"no programs in {settings.programs_file}"
        ),
    )


@programs.command("show")
@click.argument("name")
@JSON
@pass_state
def show_program(state: CliState, name: str, as_json: bool) -> None:
    """One program: its kind, what it runs and its default properties."""
    from scheduler.programs.runtime import load_catalog

    program = _named(load_catalog(state.settings()), name)
    if as_json:
        echo_json(_program_dict(program))
        return
    for label, value in _program_dict(program).items():
        said = json.dumps(value) if isinstance(value, dict) else value  # as `runs show` does
        click.echo(f"{label + ':':<12} {said}")


def _named(catalog: ProgramCatalog, name: str) -> Program:
    """The program the command names; an unknown one is a not-found (exit status 4), as a
    schedule or run is, though naming one inside a schedule is a bad request (2)."""
    from scheduler.errors import TaskNotFoundError, UnknownProgramError

    try:
        return catalog.get(name)
    except UnknownProgramError as error:
        raise TaskNotFoundError(str(error)) from None


def _program_dict(program: Program) -> dict[str, Any]:
    return {
        "name": program.name,
        "kind": str(program.kind),
        "spec": dict(program.spec),
        "properties": dict(program.properties),
        "description": program.description,
    }


@click.group()
def runs() -> None:
    """Runs of programs: list and inspect them, start a program by hand, kill a run."""


@contextmanager
def run_store_of(settings: Settings, store: TaskStore | None = None) -> Iterator[RunStore]:
    """The run store alone: reading runs needs no log (nor its topic). `store`: the task store,
    opened already (left open), instead of its own."""
    from scheduler.programs.runtime import open_run_store
    from scheduler.runtime import open_existing_store

    with ExitStack() as stack:
        if store is None:
            store = open_existing_store(settings)
            stack.callback(store.close)
        # Inspecting creates no Cassandra table: missing ones are said, with `schema apply`.
        run_store = open_run_store(settings, store, create_schema=settings.store == "sqlite")
        stack.callback(run_store.close)
        yield run_store


@contextmanager
def _log_and_run_store(settings: Settings) -> Iterator[tuple[TaskLog, RunStore]]:
    from scheduler.programs.runtime import open_run_store

    with ExitStack() as stack:
        log, store = stack.enter_context(backends(settings))
        run_store = open_run_store(settings, store, create_schema=settings.store == "sqlite")
        stack.callback(run_store.close)
        yield log, run_store


@runs.command("list")
@click.option("--program", help="Only runs of this program.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(STATUSES, case_sensitive=False),
    help="Only runs in this status; repeat for several.",
)
@click.option(
    "--limit", default=50, show_default=True, type=click.IntRange(min=1), help="At most this many."
)
@click.option(
    "--after",
    metavar="CURSOR",
    help="Continue a listing: the cursor the page before printed (its `next page:` line).",
)
@JSON
@pass_state
def list_runs(
    state: CliState,
    program: str | None,
    statuses: Sequence[str],
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    """Runs, newest first, a page at a time: when more match, the last line (on stderr) gives
    the --after that lists the next, older page."""
    from scheduler.programs.abc import run_cursor
    from scheduler.programs.cursor import decode_run_cursor, encode_run_cursor

    wanted = {RunStatus(s.upper()) for s in statuses} or None
    try:
        cursor = None if after is None else decode_run_cursor(after)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--after") from None
    with run_store_of(state.settings()) as run_store:
        found = run_store.list_runs(program=program, statuses=wanted, limit=limit + 1, after=cursor)
    more = len(found) > limit
    found = found[:limit]
    if more:
        echo_err(f"next page: --after {encode_run_cursor(run_cursor(found[-1]))}")
    if as_json:
        echo_json([run.to_json() for run in found])
        return
    of = f" of {program}" if program else ""
    if wanted:
        of += " " + " or ".join(sorted(str(s) for s in wanted))
    echo_table(
        ["RUN", "PROGRAM", "STATUS", "STARTED BY", "CREATED", "ENDED", "ATTEMPTS"],
        [
            (
                r.run_id,
                r.program,
                r.status,
                r.started_by,
                iso(r.created_ms),
                iso(r.ended_ms),
                r.attempts,
            )
            for r in found
        ],
        empty=f"no runs{of}" + (" older than that --after" if cursor else " in the run store"),
    )


def _get(run_store: RunStore, run_id: str) -> Run:
    from scheduler.programs.operator import get_run, whole_run_id

    return get_run(run_store, whole_run_id(run_store, run_id))


@runs.command("show")
@click.argument("run_id", metavar="RUN")
@JSON
@pass_state
def show_run(state: CliState, run_id: str, as_json: bool) -> None:
    """One run, with its arguments, times, attempts and last error. RUN may be the start of a
    run id (8 characters, as the dashboard shows) when one of the newest runs alone has it."""
    with run_store_of(state.settings()) as run_store:
        run = _get(run_store, run_id)
    if as_json:
        echo_json(run.to_json())
        return
    shown = run.to_json()
    for name in ("created_ms", "requested_ms", "started_ms", "ended_ms"):
        shown[name.removesuffix("_ms")] = iso(shown.pop(name))
    for label, value in shown.items():
        # Arguments as JSON, not Python's repr: what `--arg` and the programs file write.
        said = json.dumps(value) if isinstance(value, dict) else value
        click.echo(f"{label + ':':<13} {said}")


def _parse_args(pairs: Sequence[str]) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--arg")
        parsed[name] = value
    return parsed


@runs.command("start")
@click.argument("program")
@click.option("--arg", "args", multiple=True, metavar="NAME=VALUE", help="A run argument.")
@click.option(
    "--request-id",
    help="Names this request: the same id starts one run however often it is sent (default: "
    "a new one).",
)
@JSON
@pass_state
def start_run(
    state: CliState, program: str, args: Sequence[str], request_id: str | None, as_json: bool
) -> None:
    """Start PROGRAM once, by hand; a worker launches it (see `runs show` for its progress)."""
    from scheduler.client import SchedulerClient
    from scheduler.engine.clock import now_ms
    from scheduler.programs.operator import start
    from scheduler.programs.runtime import load_catalog, operator_name
    from scheduler.runtime import build_log, topic_partition_check

    settings = state.settings()
    catalog = load_catalog(settings)  # an unknown program is refused before the log is opened
    _named(catalog, program)
    request_id = request_id or uuid.uuid4().hex
    operator = operator_name()
    log = build_log(settings)
    try:
        topic_partition_check(log, settings.partitions)
        with SchedulerClient(log=log, grace_window_s=settings.grace_window_s) as client:
            request = start(
                client,
                catalog,
                program,
                request_id=request_id,
                operator=operator,
                now_ms=now_ms(),
                properties=_parse_args(args),
            )
    finally:
        log.close()
    if as_json:
        echo_json({"run_id": request.run_id, "request_key": request.request_key})
    else:
        click.echo(
            f"run {request.run_id} of {program} requested by operator:{operator} (request id "
            f"{request_id}); `scheduler runs show {request.run_id[:8]}` shows its progress"
        )


@runs.command("kill")
@click.argument("run_id", metavar="RUN")
@pass_state
def kill_run(state: CliState, run_id: str) -> None:
    """Kill RUN: cancel its task, which stops its process or Spark job group; it ends KILLED.
    RUN may be the start of a run id, as for `runs show`."""
    from scheduler.client import SchedulerClient
    from scheduler.engine.clock import now_ms
    from scheduler.programs.operator import kill, whole_run_id

    settings = state.settings()
    with _log_and_run_store(settings) as (log, run_store), SchedulerClient(log=log) as client:
        run_id = whole_run_id(run_store, run_id)
        if kill(client, run_store, settings, run_id, now_ms=now_ms()):
            click.echo(f"run {run_id} killed before it started")
            return
    click.echo(f"run {run_id} is being killed; `scheduler runs show {run_id}` shows when it ends")


@click.group()
def events() -> None:
    """The events topic (`<topic>-events`): program-status and data-availability events."""


@events.command("publish-partition")
@click.argument("dataset")
@click.argument("partitions", nargs=-1, required=True)
@JSON
@pass_state
def publish_partition(
    state: CliState, dataset: str, partitions: Sequence[str], as_json: bool
) -> None:
    """Say that PARTITIONS of DATASET landed (schedules with a partition trigger count them)."""
    from scheduler.programs.events import EventPublisher
    from scheduler.programs.runtime import build_events_log

    settings = state.settings()
    events_log = build_events_log(settings)
    try:
        events_log.ensure_topic(settings.partitions)
        publisher = EventPublisher(events_log)
        try:
            event_id = uuid.uuid4().hex
            publisher.publish_partitions(dataset, partitions, event_id=event_id).result(60)
        finally:
            publisher.close()
    finally:
        events_log.close()
    if as_json:
        echo_json({"dataset": dataset, "partitions": list(partitions), "event_id": event_id})
    else:
        click.echo(f"published {len(partitions)} partition(s) of {dataset} ({event_id})")
