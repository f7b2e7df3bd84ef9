"""`scheduler chaos SCENARIO --duration S`: a fault scenario on the replicated cluster, and the
checker's report (docs/reliability.md)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from scheduler.chaos.scenarios import SCENARIOS


@click.command()
@click.argument("scenario", type=click.Choice(sorted(SCENARIOS)))
@click.option(
    "--duration",
    type=click.FloatRange(min=10),
    default=120.0,
    show_default=True,
    help="Seconds in which rounds of the fault begin; the load lasts until the last round ends.",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the record file and the worker logs go (default: a new temporary directory).",
)
def chaos(scenario: str, duration: float, directory: Path | None) -> None:
    """Run SCENARIO's faults under a steady load on the cluster of `scheduler services up
    --cluster`, then print the checker's report; exit 1 unless its verdict is OK."""
    from scheduler.chaos.run import ChaosRun

    where = directory or Path(tempfile.mkdtemp(prefix=f"chaos-{scenario}-"))
    run = ChaosRun(where, scenario)
    click.echo(f"chaos: {scenario} for {duration:g} s; records and logs in {where}")
    try:
        SCENARIOS[scenario](run, duration)
        report = run.finish()
    finally:
        run.close()
    click.echo(report.render())
    if not report.ok:
        raise SystemExit(1)
