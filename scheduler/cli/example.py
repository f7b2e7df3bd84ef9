"""`scheduler example run`: the example pipeline, imported only when asked for.

The example lives in `scheduler.examples.clicks.run` (its `main(settings)`), so the CLI does not
depend on it and a build without the examples still has a working `scheduler` command.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import click

from scheduler.cli.context import CliState, pass_state
from scheduler.errors import ConfigurationError

EXAMPLE_MODULE = "scheduler.examples.clicks.run"


@click.group()
def example() -> None:
    """The example pipeline (click counts aggregated by PySpark jobs)."""


@example.command()
@click.option(
    "--fleet",
    is_flag=True,
    help="Run no worker in this process: the workers of the example's group run the "
    "pipeline, started with the file `scheduler example programs` writes as their programs "
    "file and this data directory shared (Kafka and Cassandra only; docker/example.yml).",
)
@pass_state
def run(state: CliState, fleet: bool) -> None:
    """Run the example pipeline on the configured backends (the embedded default needs
    nothing else): three programs on three schedules (hourly cron, backfilled over yesterday;
    the rollup once 24 hours landed; the report when the rollup completes), run by a worker
    in this process until the report is written; it says what fired and why.

    On Kafka and Cassandra it uses a topic, consumer group and keyspace of its own (the
    configured names with an "example" suffix), so a deployment's tasks and workers are left
    alone."""
    # Its own lines say what fired, why and how far the runs got; a line per finished task
    # (84 for the day) would bury them. `task_log_level` set by the user still wins.
    chosen = state.origin("task_log_level") != "task_log_level"
    settings = state.settings(**({} if chosen else {"task_log_level": "WARNING"}))
    _example_module().main(settings, fleet=fleet)


@example.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@pass_state
def programs(state: CliState, file: Path) -> None:
    """Write the example's programs for yesterday to FILE (JSON), for workers that run the
    example's tasks (`scheduler example run --fleet`): their programs file (setting
    programs_file), with the example's topic, group and keyspace and this data directory.
    Written whole or not at all, so workers may write it at once."""
    module = _example_module()
    text = json.dumps(module.programs_file(state.settings()), indent=2) + "\n"
    file.parent.mkdir(parents=True, exist_ok=True)
    partial = file.with_name(f".{file.name}.{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    partial.replace(file)
    click.echo(f"wrote the example's programs to {file}")


def _example_module() -> Any:
    """`EXAMPLE_MODULE`, or a ConfigurationError when this build has no examples."""
    try:
        module = importlib.import_module(EXAMPLE_MODULE)
    except ModuleNotFoundError as error:
        if error.name is None or not EXAMPLE_MODULE.startswith(error.name):
            raise
        raise ConfigurationError(
            f"the example pipeline is not installed in this build ({EXAMPLE_MODULE} is "
            "missing); install the package from a full checkout"
        ) from None
    if not callable(getattr(module, "main", None)):
        raise ConfigurationError(f"{EXAMPLE_MODULE} has no main(settings) function to run")
    return module
