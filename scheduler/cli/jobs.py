"""`scheduler jobs`: batch jobs declared in the seed's JSON file (docs/batch-jobs.md).

`check` reads only the file. The others read the batch store directly and send changes as
tasks of the configuration's queue (`batch:<name>`), which a worker applies in order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from scheduler.attempts import error_summary
from scheduler.batch.config import parse_configuration
from scheduler.batch.durations import format_partition, parse_partition
from scheduler.batch.errors import BatchConfigError
from scheduler.batch.state import Status
from scheduler.cli.context import CliState, pass_state
from scheduler.cli.output import echo_json, echo_table
from scheduler.wording import counted

if TYPE_CHECKING:
    from scheduler.batch.api import BatchJobs
    from scheduler.settings import Settings

JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
STATUSES = [status.value for status in Status]
LOAD_WAIT_S = 30.0
"""How long `jobs load` waits for a worker to put the configuration in force."""


@click.group()
def jobs() -> None:
    """Partitioned batch jobs: check and load their JSON file, see their partitions, rerun,
    pause and resume them."""


@contextmanager
def _jobs(settings: Settings, *, client: bool, adds: bool = False) -> Iterator[BatchJobs]:
    """The batch jobs over the store (and the log with `client`); `adds` (load) may begin an
    embedded data directory, as `enqueue` does."""
    from scheduler.batch.api import BatchJobs
    from scheduler.batch.runtime import open_batch_store
    from scheduler.runtime import open_existing_store, open_sender

    with ExitStack() as stack:
        store = open_existing_store(settings, adds=adds)
        stack.callback(store.close)
        batch = open_batch_store(settings, store, create_schema=settings.store == "sqlite")
        stack.callback(batch.close)
        sender = open_sender(stack, settings, adds=adds) if client else None
        yield BatchJobs(store=batch, client=sender, name=settings.batch_name)


@jobs.command("check")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@JSON
def check(file: Path, as_json: bool) -> None:
    """Check FILE and report every problem, each with its job and what to write instead
    (exit status 2 when it is not valid)."""
    try:
        config = parse_configuration(file.read_bytes())
    except BatchConfigError as error:
        if as_json:
            echo_json(
                {
                    "valid": False,
                    "problems": [
                        {"path": p.path, "job": p.job, "message": p.message} for p in error.problems
                    ],
                }
            )
            raise SystemExit(2) from None
        raise
    if as_json:
        echo_json({"valid": True, "jobs": [job.name for job in config.jobs]})
        return
    names = ", ".join(job.name for job in config.jobs)
    click.echo(f"{file}: valid, {counted(len(config.jobs), 'job')}: {names}")


@jobs.command("load")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_state
def load(state: CliState, file: Path) -> None:
    """Check FILE and have the workers apply it as a diff of the configuration in force
    (running partitions are not interrupted); waits until a worker has (exit status 3 if none
    did within 30 s)."""
    with _jobs(state.settings(), client=True, adds=True) as batch:
        config = batch.load(file.read_text(encoding="utf-8"), source=str(file), wait_s=LOAD_WAIT_S)
    click.echo(f"loaded {file} ({counted(len(config.jobs), 'job')}): in force")


@jobs.command("list")
@JSON
@pass_state
def list_jobs(state: CliState, as_json: bool) -> None:
    """Every job of the configuration in force, its partitions counted by state (none before
    the first load: an empty listing, as for programs, runs and schedules)."""
    with _jobs(state.settings(), client=False) as batch:
        rows = [] if batch.stored() is None else batch.jobs()
    if as_json:
        echo_json(
            [
                {
                    "name": r.name,
                    "paused": r.paused,
                    "max_parallelism": r.max_parallelism,
                    **asdict(r.counts),
                }
                for r in rows
            ]
        )
        return
    echo_table(
        [
            "JOB",
            "PAUSED",
            "TOTAL",
            "DONE",
            "MARKED",
            "RUNNING",
            "FAILED",
            "PENDING",
            "OLDEST PENDING",
            "NOT DUE",
        ],
        [
            (
                r.name,
                "yes" if r.paused else "",
                r.counts.total,
                r.counts.succeeded,
                r.counts.marked_success,
                r.counts.running,
                r.counts.failed,
                r.counts.pending,
                ""
                if r.counts.oldest_pending is None
                else format_partition(r.counts.oldest_pending),
                r.counts.waiting_time,
            )
            for r in rows
        ],
        empty=(
            "no batch jobs: no configuration is loaded; `scheduler jobs load FILE` loads one "
            "(workers with batch_file set apply it)"
        ),
    )


def _partition(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A partition's date option, checked before any store is opened and reported against its
    option (`Invalid value for '--from'`)."""
    if value is None:
        return None
    try:
        return parse_partition(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@jobs.command("partitions")
@click.argument("job")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(STATUSES, case_sensitive=False),
    help="Only partitions in this status (repeatable).",
)
@click.option(
    "--from", "first", callback=_partition, help="The first partition shown (yyyy-MM-dd HH:mm:ss)."
)
@click.option("--limit", default=1000, show_default=True, help="Partitions looked at, at most.")
@click.option("--history", "with_history", is_flag=True, help="Also list every attempt.")
@JSON
@pass_state
def partitions(
    state: CliState,
    job: str,
    statuses: Sequence[str],
    first: int | None,
    limit: int,
    with_history: bool,
    as_json: bool,
) -> None:
    """JOB's partitions, oldest first: their status, attempts, and what each waits for or why
    it never will run."""
    wanted = {Status(s.upper()) for s in statuses} or None
    with _jobs(state.settings(), client=False) as batch:
        config = batch.configuration()
        index = 0
        if first is not None and config is not None and job in config.by_name:
            from scheduler.batch.partitions import Grid

            index = max(Grid.of(config.job(job)).ceil(first), 0)
        found = batch.partitions(job, statuses=wanted, first=index, limit=limit)
        history = batch.history(job, limit=limit) if with_history else []
    if as_json:
        echo_json(
            {
                "partitions": [_view_dict(v) for v in found],
                **({"history": [a.to_json() for a in history]} if with_history else {}),
            }
        )
        return
    counts = Counter(v.status.value for v in found)
    click.echo(
        "  ".join(f"{status}: {count}" for status, count in sorted(counts.items())) or "none"
    )
    echo_table(
        ["PARTITION", "STATUS", "ATTEMPTS", "WAITS FOR / WHY"],
        [(v.name, v.status.value, v.attempts or "", _why(v)) for v in found],
    )
    if history:
        click.echo("")
        echo_table(
            ["PARTITION", "ATTEMPT", "STATUS", "RUN", "REASON"],
            [
                (
                    format_partition(a.partition),
                    a.attempt,
                    a.status.value,
                    a.run_id,
                    error_summary(a.reason) or "",
                )
                for a in history
            ],
        )


def _why(view: Any) -> str:
    if view.waiting_for and view.status is Status.WAITING_DEPENDENCIES:
        return ", ".join(view.waiting_for)
    text = error_summary(view.reason) or ""
    if view.status is Status.MARKED_SUCCESS and not text:
        # Its state keeps no error: the attempt that failed holds it.
        return "run failed; on_failure marked it done (--history: why)"
    if view.retry_at is not None:
        text = f"retries at {format_partition(view.retry_at)}: {text}"
    return text


def _view_dict(view: Any) -> dict[str, Any]:
    return {
        "job": view.job,
        "partition": view.name,
        "status": view.status.value,
        "attempts": view.attempts,
        "waiting_for": list(view.waiting_for),
        "reason": view.reason,
        "retry_at": None if view.retry_at is None else format_partition(view.retry_at),
    }


@jobs.command("rerun")
@click.argument("job")
@click.option(
    "--from",
    "first",
    callback=_partition,
    required=True,
    help="First partition (yyyy-MM-dd HH:mm:ss).",
)
@click.option(
    "--to", "stop", callback=_partition, required=True, help="End of the range, exclusive."
)
@click.option("--with-dependants", is_flag=True, help="Rerun the partitions waiting on them too.")
@pass_state
def rerun_job(state: CliState, job: str, first: int, stop: int, with_dependants: bool) -> None:
    """Run JOB's partitions in [--from, --to) again, successes and marked successes included."""
    with _jobs(state.settings(), client=True) as batch:
        batch.rerun(job, first, stop, with_dependants=with_dependants)
    span = f"[{format_partition(first)}, {format_partition(stop)})"
    click.echo(f"sent a rerun of {job} {span} to the workers")


@jobs.command("pause")
@click.argument("job")
@pass_state
def pause(state: CliState, job: str) -> None:
    """Start no new partition of JOB (running ones go on)."""
    with _jobs(state.settings(), client=True) as batch:
        batch.pause(job)
    click.echo(f"sent: pause {job}")


@jobs.command("resume")
@click.argument("job")
@pass_state
def resume(state: CliState, job: str) -> None:
    """Start JOB's partitions again."""
    with _jobs(state.settings(), client=True) as batch:
        batch.resume(job)
    click.echo(f"sent: resume {job}")
