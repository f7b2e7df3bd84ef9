"""`scheduler schedules`: create, apply, change and inspect schedules (docs/schedules.md).

Reads go to the schedule store. Changes are tasks in each schedule's queue that a worker with
programs applies; a command waits (`--wait`, 30 s by default) until the store shows them
applied. Exit status 4 for an unknown schedule, 5 for a conflict (enabling an enabled schedule,
creating one that exists), 3 when no worker applied the change in time.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import click

from scheduler.cli.context import CliState, pass_state
from scheduler.cli.keys import iso
from scheduler.cli.output import echo_json, echo_table
from scheduler.schedules.abc import STATUSES, TRIGGER_TYPES, ScheduleRecord
from scheduler.schedules.errors import ScheduleError
from scheduler.schedules.model import Schedule, describe
from scheduler.schedules.parse import parse_schedule
from scheduler.schedules.waiting import waiting_on

if TYPE_CHECKING:
    from scheduler.schedules.client import SchedulesClient
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore

JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
WAIT = click.option(
    "--wait",
    "wait_s",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds to wait for a worker to apply the change (0: do not wait).",
)


def _said(done: str, wait_s: float) -> str:
    """A change's line: `done` once a worker applied it, or that it was only sent (--wait 0)."""
    if wait_s:
        return done
    return f"{done} (sent, not waited for: a worker with programs applies it)"


@click.group()
def schedules() -> None:
    """Schedules: which program runs when (cron, data arrival, program status, AND/OR)."""


def _client(
    settings: Settings,
    *,
    wait_s: float | None = None,
    writes: bool = True,
    adds: bool = False,
    store: TaskStore | None = None,
) -> AbstractContextManager[SchedulesClient]:
    from scheduler.schedules.runtime import connect_schedules

    return connect_schedules(settings, wait_s=wait_s, writes=writes, adds=adds, store=store)


def read_schedules(path: Path) -> list[Schedule]:
    """The schedules of a file: JSON (one schedule, a list, or {"schedules": [...]}) or TOML
    (`[schedules.NAME]` tables, the name taken from the table's, or `[[schedules]]` entries
    that each have a `name`)."""
    text = path.read_text("utf-8")
    data: Any
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        raise ScheduleError(f"{path} is not valid {path.suffix or 'JSON'}: {error}") from None
    if path.suffix == ".toml":
        data = _toml_schedules(path, data.get("schedules", {}))
    if isinstance(data, dict) and "schedules" in data:
        data = data["schedules"]
    items = data if isinstance(data, list) else [data]
    parsed, problems = [], []
    for number, item in enumerate(items, 1):  # every schedule's problems at once
        if not isinstance(item, dict):  # parsed already: a string here is not JSON to read
            problems.append(
                f"{path}: schedule {number} is {type(item).__name__} {item!r:.40}; each "
                "schedule is an object with name, program and trigger"
            )
            continue
        try:
            parsed.append(parse_schedule(item))
        except ScheduleError as error:
            problems.append(str(error))
    if problems:
        raise ScheduleError("\n".join(problems))
    return parsed


def _toml_schedules(path: Path, schedules: Any) -> list[Any]:
    """The entries of a TOML file's `schedules`: named tables or an array of tables."""
    if isinstance(schedules, list):
        return schedules
    shape = "write each schedule as a [schedules.NAME] table or a [[schedules]] entry with a name"
    if not isinstance(schedules, dict):
        raise ScheduleError(f"{path}: `schedules = {schedules!r}` holds no schedule; {shape}")
    not_tables = [name for name, body in schedules.items() if not isinstance(body, dict)]
    if not_tables:
        raise ScheduleError(f"{path}: schedules.{not_tables[0]} is not a table; {shape}")
    return [{"name": name, **body} for name, body in schedules.items()]


def _row(record: ScheduleRecord) -> tuple[Any, ...]:
    schedule = record.schedule
    nexts = sorted(record.next_fires.values()) if record.enabled else []
    return (
        schedule.name,
        record.status,
        describe(schedule.trigger, schedule.time_zone),
        schedule.program,
        iso(nexts[0]) if nexts else "",
        schedule.description,
    )


@schedules.command("create")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@WAIT
@pass_state
def create(state: CliState, file: Path, wait_s: float) -> None:
    """Create the schedules in FILE (JSON or TOML), disabled; all or none of them."""
    batch = read_schedules(file)
    with _client(state.settings(), wait_s=wait_s, adds=True) as client:
        client.create(batch)
    click.echo(
        _said(f"created {', '.join(s.name for s in batch)} (disabled; enable them to run)", wait_s)
    )


@schedules.command("apply")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--source",
    help="Who declares these schedules (default: the file's name without its extension, "
    "`deploy` for deploy.toml).",
)
@click.option(
    "--update-schedules/--no-update-schedules",
    default=True,
    show_default=True,
    help="Create, update and delete to match FILE (a development redeploy), or leave existing "
    "schedules alone (production, where operators own them).",
)
@WAIT
@JSON
@pass_state
def apply(
    state: CliState,
    file: Path,
    source: str | None,
    update_schedules: bool,
    wait_s: float,
    as_json: bool,
) -> None:
    """Make the schedules declared by FILE (by its --source) exactly those in it: a redeploy."""
    batch = read_schedules(file)
    # Stored as `apply:NAME`; a --source copied from a message that shows it so is taken as is.
    declared_by = source or file.stem
    if not declared_by.startswith("apply:"):
        declared_by = f"apply:{declared_by}"
    with _client(state.settings(), wait_s=wait_s, adds=True) as client:
        result = client.apply(batch, source=declared_by, update_schedules=update_schedules)
    done = {
        "created": list(result.created),
        "updated": list(result.updated),
        "deleted": list(result.deleted),
        "unchanged": list(result.unchanged),
    }
    if as_json:
        echo_json(done)
        return
    for what, names in done.items():
        if names:
            click.echo(_said(f"{what}: {', '.join(names)}", wait_s))


@schedules.command("list")
@click.option("--trigger-type", type=click.Choice(TRIGGER_TYPES, case_sensitive=False))
@click.option("--status", type=click.Choice(STATUSES, case_sensitive=False))
@click.option("--triggered-by", metavar="PROGRAM", help="Only those a run of PROGRAM triggers.")
@click.option("--after", default="", help="Names after this one (the next page).")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1))
@JSON
@pass_state
def list_schedules(
    state: CliState,
    trigger_type: str | None,
    status: str | None,
    triggered_by: str | None,
    after: str,
    limit: int,
    as_json: bool,
) -> None:
    """Schedules by name, a page at a time."""
    with _client(state.settings(), writes=False) as client:
        if triggered_by is not None:
            found = client.triggered_by(triggered_by)
        else:
            found = client.list_schedules(
                trigger_type=trigger_type and trigger_type.upper(),
                status=status and status.upper(),
                after=after,
                limit=limit,
            )
    if as_json:
        echo_json([r.to_json() for r in found])
        return
    filtered = trigger_type or status or triggered_by or after
    echo_table(
        ["SCHEDULE", "STATUS", "TRIGGER", "PROGRAM", "NEXT FIRE", "DESCRIPTION"],
        [_row(r) for r in found],
        empty=(
            "no schedules match"
            if filtered
            else "no schedules: `scheduler schedules create FILE` adds some"
        ),
    )


@schedules.command("show")
@click.argument("name")
@JSON
@pass_state
def show(state: CliState, name: str, as_json: bool) -> None:
    """One schedule: its definition (the seeds' ScheduleDetail JSON) and its state."""
    with _client(state.settings(), writes=False) as client:
        record = client.get(name)
    if as_json:
        echo_json(record.to_json())
        return
    click.echo(f"{'status:':<10} {record.status} (revision {record.revision})")
    for index, fire in sorted(record.next_fires.items()):
        click.echo(f"{'next fire:':<10} {iso(fire)} (cron {index})")
    click.echo(json.dumps(record.schedule.to_json(), indent=2))


@schedules.command("update")
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@WAIT
@pass_state
def update(state: CliState, name: str, file: Path, wait_s: float) -> None:
    """Change NAME with the fields in FILE (a JSON object; omitted fields keep their value)."""
    try:
        changes = json.loads(file.read_text("utf-8"))
    except ValueError as error:
        raise ScheduleError(f"{file} is not valid JSON: {error}") from None
    if not isinstance(changes, dict):
        raise ScheduleError(f"{file} must hold a JSON object of the fields to change")
    with _client(state.settings(), wait_s=wait_s) as client:
        client.update(name, changes)
    click.echo(_said(f"updated {name}", wait_s))


@schedules.command("enable")
@click.argument("name")
@WAIT
@pass_state
def enable(state: CliState, name: str, wait_s: float) -> None:
    """Enable NAME: its cron fires and events count from now on."""
    with _client(state.settings(), wait_s=wait_s) as client:
        client.enable(name)
    click.echo(_said(f"enabled {name}", wait_s))


@schedules.command("disable")
@click.argument("name")
@WAIT
@pass_state
def disable(state: CliState, name: str, wait_s: float) -> None:
    """Disable NAME: its pending job is discarded, its events are dropped."""
    with _client(state.settings(), wait_s=wait_s) as client:
        client.disable(name)
    click.echo(_said(f"disabled {name}", wait_s))


@schedules.command("delete")
@click.argument("names", nargs=-1, required=True)
@WAIT
@pass_state
def delete(state: CliState, names: Sequence[str], wait_s: float) -> None:
    """Delete NAMES; with any unknown name, none is deleted."""
    with _client(state.settings(), wait_s=wait_s) as client:
        client.delete(list(names))
    click.echo(_said(f"deleted {', '.join(names)}", wait_s))


def _instant(text: str, option: str) -> int:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an ISO time, e.g. 2026-01-01T00:00Z", param_hint=option
        ) from None
    if when.tzinfo is None:
        raise click.BadParameter(f"{text!r} has no time zone; add Z or +hh:mm", param_hint=option)
    return int(when.timestamp() * 1000)


@schedules.command("reenable")
@click.option("--from", "start", required=True, help="ISO time, inclusive.")
@click.option("--to", "end", required=True, help="ISO time, exclusive.")
@WAIT
@JSON
@pass_state
def reenable(state: CliState, start: str, end: str, wait_s: float, as_json: bool) -> None:
    """Enable again the schedules disabled between --from and --to."""
    with _client(state.settings(), wait_s=wait_s) as client:
        names = client.reenable(_instant(start, "--from"), _instant(end, "--to"))
    if as_json:
        echo_json(names)
    else:
        listed = f"{': ' if names else ''}{', '.join(names)}"
        click.echo(_said(f"re-enabled {len(names)} schedule(s){listed}", wait_s))


def _times(
    state: CliState, name: str, count: int, as_json: bool, *, previous: bool, at: str | None
) -> None:
    when = None if at is None else _instant(at, "--before" if previous else "--after")
    with _client(state.settings(), writes=False) as client:
        if previous:
            fires = client.previous_runs(name, count, before_ms=when)
        else:
            fires = client.next_runs(name, count, after_ms=when)
        zones = {cron.time_zone for cron in client.get(name).schedule.crons()}
    if as_json:
        echo_json([{"time_ms": f, "time": iso(f)} for f in fires])
        return
    # Beside UTC, the wall time where the cron is read, when all its crons share one zone.
    local = ZoneInfo(zones.pop()) if len(zones) == 1 and zones != {"UTC"} else None
    for fire in fires:
        if local is None:
            click.echo(iso(fire))
        else:
            wall = datetime.fromtimestamp(fire / 1000, local)
            click.echo(f"{iso(fire)}  {wall:%Y-%m-%d %H:%M:%S %Z}")


@schedules.command("next-runs")
@click.argument("name")
@click.option("--count", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--after", metavar="TIME", help="From this ISO time instead of now.")
@JSON
@pass_state
def next_runs(state: CliState, name: str, count: int, after: str | None, as_json: bool) -> None:
    """The next fire times of NAME's cron triggers, in UTC and in the cron's own time zone
    (`--after 2027-03-27T00:00Z` shows how a daylight-saving change moves them)."""
    _times(state, name, count, as_json, previous=False, at=after)


@schedules.command("previous-runs")
@click.argument("name")
@click.option("--count", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--before", metavar="TIME", help="Before this ISO time instead of now.")
@JSON
@pass_state
def previous_runs(
    state: CliState, name: str, count: int, before: str | None, as_json: bool
) -> None:
    """The last fire times of NAME's cron triggers, newest first, in UTC and in the cron's own
    time zone."""
    _times(state, name, count, as_json, previous=True, at=before)


@schedules.command("jobs")
@click.argument("name")
@JSON
@pass_state
def jobs(state: CliState, name: str, as_json: bool) -> None:
    """NAME's jobs: the pending ones with what each waits for, and the last few that ended,
    with the run each launched (`scheduler runs show RUN`) or why it ended."""
    from scheduler.cli.programs import run_store_of
    from scheduler.runtime import open_existing_store

    settings = state.settings()
    with ExitStack() as stack:
        store = open_existing_store(settings)
        stack.callback(store.close)
        found = stack.enter_context(_client(settings, writes=False, store=store)).jobs(name)
        # A launched job stays PENDING_LAUNCH (the seeds' last state): its run says how it went.
        run_ids = [j.run_id for j in found if j.run_id is not None]
        runs = stack.enter_context(run_store_of(settings, store)).get_many(run_ids)
    run_status = {j.key: str(runs[j.run_id].status) for j in found if j.run_id in runs}
    if as_json:
        echo_json(
            [
                {
                    **json.loads(j.model_dump_json(by_alias=True)),
                    "run_id": j.run_id,
                    "run_status": run_status.get(j.key),
                    "waiting_for": waiting_on(j),
                }
                for j in found
            ]
        )
        return
    echo_table(
        ["JOB", "STATE", "EVENTS", "FIRST EVENT", "RUN", "RUN STATUS", "WAITING FOR / REASON"],
        [
            (
                j.key,
                j.state,
                len(j.events),
                iso(j.first_event_ms),
                j.run_id or "",
                run_status.get(j.key, ""),
                "; ".join(waiting_on(j)) or j.reason or "",
            )
            for j in found
        ],
    )
