"""`scheduler bench`: the engine's speed and memory, side by side with raw Kafka, raw Cassandra,
raw SQLite and APScheduler, on your own setup.

Each scenario is a subcommand that prints a table and writes `<out>/<scenario>.json`; `all` runs
them in turn and then `plot`. Kafka and Cassandra are used only with `--backends
kafka-cassandra`, at the addresses of the usual settings (SCHEDULER_KAFKA_BOOTSTRAP,
SCHEDULER_CASSANDRA_HOSTS, ...). docs/benchmarks.md says what each scenario measures.
"""

from __future__ import annotations

import importlib
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from scheduler.cli.context import CliState, pass_state

SCENARIOS: dict[str, str] = {
    "enqueue": "schedule_task vs raw Kafka produce / raw SQLite inserts",
    "persist": "Kafka->Cassandra persistence vs raw cassandra-driver writes",
    "execute": "end-to-end no-op tasks/s, one and two workers",
    "lag": "firing lag p50/p99/max at 25/50/90 % of the measured maximum rate",
    "backlog": "1,000,000 overdue tasks drained by a worker process: rate and peak RSS",
    "rebalance": "pause of moved and unmoved partitions when a worker joins and leaves",
    "reload": "a new owner's first read: from the bucket start vs from the reload mark",
    "move": "scheduler topic move of 1,000,000 unread tasks: rate and peak RSS",
    "spark": "Spark launch overhead: shared session vs spark-submit per task",
    "pipeline": "the example's 24 hourly Spark jobs and rollup: through the scheduler vs plain",
    "peer": "durable schedulers side by side: db-scheduler, Quartz, Celery, APScheduler 3, ours",
    "jobs": "batch jobs, 200 x a year of hourly partitions: materialise, runnable->started, "
    "a chain's hour, reload, peak RSS",
    "schedules": "10,000 cron schedules firing at once: fire->run start p50/p99 beside "
    "APScheduler 3; worker RSS with 100,000 enabled schedules vs idle",
    "api": "REST API listings over 1,000,000 tasks and 100,000 schedules: requests/s, p99; "
    "batch POST vs schedule_tasks",
    "versus": "this checkout against a baseline checkout, in turn: execute, lag, backlog, "
    "rebalance and enqueue as ratios; a 64-partition worker's threads; the engine's line count",
}
"""Scenario name -> one line of help; the module is `scheduler.bench.<name>`."""

DISTRIBUTED_ONLY = ("persist", "rebalance", "reload", "move")
NOT_IN_ALL = ("versus",)
"""Scenarios `all` leaves out: versus needs a second checkout (`--against`)."""


def _common(function: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--size", type=click.IntRange(1), help="Tasks (rows, runs) per repetition."),
        click.option(
            "--repeat",
            type=click.IntRange(1),
            default=3,
            show_default=True,
            help="Repetitions of each side; medians are reported.",
        ),
        click.option("--smoke", is_flag=True, help="Tiny sizes, to check that it works (CI)."),
        click.option(
            "--out",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path("bench-results"),
            show_default=True,
            help="Directory of the JSON results.",
        ),
        click.option(
            "--backends",
            default="embedded",
            show_default=True,
            help="Comma-separated: embedded, kafka-cassandra.",
        ),
        click.option(
            "--keep-scratch",
            is_flag=True,
            help="Keep the data directories and worker logs (kept anyway when a scenario fails).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _options(
    state: CliState,
    size: int | None,
    repeat: int,
    smoke: bool,
    out: Path,
    backends: str,
    keep_scratch: bool,
    data_bytes: int = 0,
    peers: str = "",
    backlog: int | None = None,
    against: Path | None = None,
    scenarios: str = "",
) -> Any:
    from scheduler.bench.common import BACKENDS, BenchOptions
    from scheduler.config import env_config

    chosen = tuple(b.strip() for b in backends.split(",") if b.strip())
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown or not chosen:
        raise click.BadParameter(
            f"{','.join(unknown) or backends!r}: use {' and/or '.join(BACKENDS)}",
            param_hint="--backends",
        )
    _quiet_per_task_lines(state)
    scratch = Path(tempfile.mkdtemp(prefix="scheduler-bench-"))
    _clean_up_on_success(scratch, keep_scratch)
    return BenchOptions(
        size=size,
        repeat=1 if smoke else repeat,
        smoke=smoke,
        out=out,
        backends=chosen,
        settings=state.settings(),
        scratch=scratch,
        data_bytes=data_bytes,
        peers=_peer_groups(peers),
        backlog=backlog,
        against=against,
        scenarios=_versus_scenarios(scenarios) if scenarios else (),
        config=state.config or env_config(),
    )


def _clean_up_on_success(scratch: Path, keep: bool) -> None:
    """Remove the scratch directory when the command ends well (a backlog run leaves GBs)."""
    ctx = click.get_current_context()

    def clean_up() -> None:
        failed = sys.exc_info()[0] is not None or ctx.meta.get("bench_failed")
        if keep or failed:
            click.echo(f"scratch (data, worker logs) kept in {scratch}", err=True)
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    ctx.call_on_close(clean_up)


def _quiet_per_task_lines(state: CliState) -> None:
    """The per-task lines of the workers and peers this process runs (an embedded worker,
    APScheduler) at WARNING: a scenario runs tens of thousands of tasks, so a line each was most
    of its output and part of what it measured, for both sides. `task_log_level` set by the
    user still wins for ours."""
    chosen = state.origin("task_log_level") != "task_log_level"
    state.settings(**({} if chosen else {"task_log_level": "WARNING"}))  # configures the logs
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


def _run(name: str, options: Any) -> None:
    from scheduler.bench.common import write_result

    module = importlib.import_module(f"scheduler.bench.{name}")
    started = time.monotonic()
    click.echo(f"-- {name}: {SCENARIOS[name]} (backends {','.join(options.backends)})")
    result = module.run(options)
    result.details["wall_s"] = round(time.monotonic() - started, 1)
    write_result(result, options)


@click.group()
def bench() -> None:
    """Measure throughput, firing lag and memory, against raw clients and a peer scheduler.

    \b
    Examples:
      scheduler bench all --smoke                      # does it work? (seconds)
      scheduler bench execute --size 50000 --repeat 5
      scheduler bench all --backends embedded,kafka-cassandra --out bench-results
      scheduler bench plot --out bench-results --to docs/benchmarks
    """


def _scenario(name: str) -> click.Command:
    @_common
    @pass_state
    def command(state: CliState, **kwargs: Any) -> None:
        options = _options(state, **kwargs)
        if name in DISTRIBUTED_ONLY and "kafka-cassandra" not in options.backends:
            click.echo(f"-- {name}: needs --backends kafka-cassandra; skipped")
            return
        _run(name, options)

    command.__doc__ = SCENARIOS[name] + "."
    if name == "enqueue":
        command = _DATA_BYTES(command)
    if name == "peer":
        command = _PEERS(_BACKLOG(command))
    if name == "schedules":
        command = _ENABLED(command)
    if name == "versus":
        command = _AGAINST(_VERSUS_SCENARIOS(command))
    return click.command(name)(command)


_DATA_BYTES = click.option(
    "--data-bytes",
    type=click.IntRange(0, 200_000),
    default=0,
    show_default=True,
    help="Characters of text in each task's data: measures records of your tasks' size "
    "(0: empty data, the smallest record).",
)


_PEERS = click.option(
    "--peers",
    default="",
    help="Comma-separated groups of sides: scheduler, apscheduler, celery, db-scheduler, quartz "
    "(default: all).",
)
_BACKLOG = click.option(
    "--backlog",
    type=click.IntRange(1),
    help="Tasks in workload (c), due over the next day (default 5,000; 200 with --smoke).",
)


_ENABLED = click.option(
    "--enabled",
    "backlog",
    type=click.IntRange(0),
    help="Enabled schedules held by the worker whose RSS is measured (default 100,000; 200 "
    "with --smoke).",
)


_AGAINST = click.option(
    "--against",
    type=click.Path(exists=True, path_type=Path),
    envvar="SCHEDULER_BENCH_AGAINST",  # scheduler.bench.versus.AGAINST_ENV
    help="The baseline: a checkout with its own .venv (e.g. a worktree of the commit to beat), "
    "or that checkout's Python.",
)


_VERSUS_SCENARIOS = click.option(
    "--scenarios",
    default="",
    help="Comma-separated: execute, lag, backlog, rebalance, enqueue, threads, lines (default: "
    "all; lag runs execute too, for its offered rate).",
)


def _versus_scenarios(text: str) -> tuple[str, ...]:
    from scheduler.bench.versus import SCENARIOS

    chosen = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown or not chosen:
        raise click.BadParameter(
            f"{','.join(unknown) or text!r}: use {', '.join(SCENARIOS)}", param_hint="--scenarios"
        )
    return chosen


def _peer_groups(text: str) -> tuple[str, ...]:
    from scheduler.bench.peer import GROUPS

    chosen = tuple(g.strip() for g in text.split(",") if g.strip())
    unknown = [g for g in chosen if g not in GROUPS]
    if unknown:
        raise click.BadParameter(
            f"{','.join(unknown)}: use {', '.join(GROUPS)}", param_hint="--peers"
        )
    return chosen


for _name in SCENARIOS:
    bench.add_command(_scenario(_name))


@bench.command("all")
@_common
@click.option("--skip", default="", help="Comma-separated scenarios not to run.")
@click.option(
    "--plot-to",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also draw the plots into this directory.",
)
@pass_state
def run_all(state: CliState, skip: str, plot_to: Path | None, **kwargs: Any) -> None:
    """Every scenario in turn (those needing Kafka/Cassandra only with those backends)."""
    options = _options(state, **kwargs)
    skipped = {s.strip() for s in skip.split(",") if s.strip()}
    failed: list[str] = []
    for name in SCENARIOS:
        if name in skipped or name in NOT_IN_ALL:
            continue
        if name in DISTRIBUTED_ONLY and "kafka-cassandra" not in options.backends:
            click.echo(f"-- {name}: needs --backends kafka-cassandra; skipped")
            continue
        try:
            _run(name, options)
        except Exception as error:  # the other scenarios' numbers are still worth having
            logging.getLogger(__name__).exception("scenario %s failed", name)
            click.secho(f"-- {name} failed: {type(error).__name__}: {error}", err=True, fg="red")
            failed.append(name)
    if plot_to is not None:
        from scheduler.bench.plot import plot_all

        for path in plot_all(options.out, plot_to):
            click.echo(f"plot -> {path}")
    if failed:
        click.get_current_context().meta["bench_failed"] = True
        raise click.ClickException(f"scenarios failed: {', '.join(failed)}")


@bench.command("plot")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Where the JSON results are.",
)
@click.option(
    "--to",
    "to",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("docs/benchmarks"),
    show_default=True,
    help="Where PNGs go.",
)
def plot(out: Path, to: Path) -> None:
    """Draw the JSON results as PNGs (throughput bars, lag against rate, RSS)."""
    from scheduler.bench.plot import plot_all

    for path in plot_all(out, to):
        click.echo(f"plot -> {path}")
