"""`scheduler example run`: the example pipeline, imported only when asked for.

The example lives in `scheduler.examples.clicks.run` (its `main(settings)`), so the CLI does not
depend on it and a build without the examples still has a working `scheduler` command.
"""

from __future__ import annotations

import importlib

import click

from scheduler.cli.context import CliState, pass_state
from scheduler.errors import ConfigurationError

EXAMPLE_MODULE = "scheduler.examples.clicks.run"


@click.group()
def example() -> None:
    """The example pipeline (click counts aggregated by PySpark jobs)."""


@example.command()
@pass_state
def run(state: CliState) -> None:
    """Run the example pipeline on the configured backends (the embedded default needs
    nothing else): three programs on three schedules (hourly cron, backfilled over yesterday;
    the rollup once 24 hours landed; the report when the rollup completes), run by a worker
    in this process until the report is written; it says what fired and why.

    On Kafka and Cassandra it uses a topic, consumer group and keyspace of its own (the
    configured names with an "example" suffix), so a deployment's tasks and workers are left
    alone."""
    settings = state.settings()
    try:
        module = importlib.import_module(EXAMPLE_MODULE)
    except ModuleNotFoundError as error:
        if error.name is None or not EXAMPLE_MODULE.startswith(error.name):
            raise
        raise ConfigurationError(
            f"the example pipeline is not installed in this build ({EXAMPLE_MODULE} is "
            "missing); install the package from a full checkout"
        ) from None
    entry = getattr(module, "main", None)
    if not callable(entry):
        raise ConfigurationError(f"{EXAMPLE_MODULE} has no main(settings) function to run")
    entry(settings)
