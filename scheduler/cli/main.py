"""The `scheduler` command: a click group whose subcommands are imported only when used.

Lazy loading keeps `scheduler --help` and `scheduler enqueue` quick, and lets a subcommand that
is not written yet (or whose optional dependencies are missing) fail alone instead of breaking
the whole command. Errors the product raises on purpose (`SchedulerError`) become one red line
on stderr and an exit status (2: configuration or request, 3: a backend is unreachable), never a
traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import click

from scheduler.cli.context import CliState
from scheduler.errors import BackendUnavailableError, SchedulerError

COMMANDS: dict[str, str] = {
    "worker": "scheduler.cli.worker:worker",
    "enqueue": "scheduler.cli.enqueue:enqueue",
    "enqueue-many": "scheduler.cli.enqueue_many:enqueue_many",
    "tasks": "scheduler.cli.tasks:tasks",
    "malformed": "scheduler.cli.malformed:malformed",
    "group": "scheduler.cli.group:group",
    "topic": "scheduler.cli.topic:topic",
    "schema": "scheduler.cli.schema:schema",
    "settings": "scheduler.cli.settings_cmd:settings",
    "example": "scheduler.cli.example:example",
    "services": "scheduler.cli.services:services",
    "bench": "scheduler.cli.bench:bench",
    "programs": "scheduler.cli.programs:programs",
    "runs": "scheduler.cli.programs:runs",
    "events": "scheduler.cli.programs:events",
}
"""Subcommand name -> `module:attribute` of its click command."""

EXIT_USAGE = 2
"""Bad configuration, arguments or request (click uses 2 for usage errors too)."""
EXIT_BACKEND = 3
"""Kafka, Cassandra or a file the backend needs could not be reached."""


class CliError(click.ClickException):
    """A `SchedulerError` on its way to the terminal: one red line, exit status 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.secho(f"error: {self.format_message()}", err=True, fg="red")


class BackendCliError(CliError):
    """A backend could not be reached: exit status 3, so scripts can retry later."""

    exit_code = EXIT_BACKEND


class SchedulerGroup(click.Group):
    """Imports subcommands on demand and turns the product's errors into `CliError`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, _, attribute = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            return None  # not written yet: the command is simply absent
        command: click.Command = getattr(module, attribute)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BackendUnavailableError as error:
            raise BackendCliError(str(error)) from error
        except SchedulerError as error:
            raise CliError(str(error)) from error


@click.group(cls=SchedulerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML settings file (default: $SCHEDULER_CONFIG). SCHEDULER_* environment variables "
    "override it; command-line options override both.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], case_sensitive=False),
    help="Least severe log level written to stderr (setting log_level, default INFO).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"], case_sensitive=False),
    help="Log lines as readable text or JSON objects (setting log_format, default text).",
)
@click.version_option(package_name="scheduler", prog_name="scheduler")
@click.pass_context
def cli(
    ctx: click.Context, config: Path | None, log_level: str | None, log_format: str | None
) -> None:
    """Durable, ordered task scheduling for data platforms.

    Producers enqueue tasks due at a future time; workers run them when due, one at a time per
    ordering id. By default everything lives in ./.scheduler (an embedded log and a SQLite
    store); set SCHEDULER_LOG=kafka and SCHEDULER_STORE=cassandra for the distributed mode.
    `scheduler settings docs` lists every setting.

    \b
    Examples:
      scheduler worker --executor noop &
      scheduler enqueue orders-42 --in 5m --data '{"job": "my.jobs:daily"}'
      scheduler tasks list --ordering-id orders-42
      scheduler group status
    """
    overrides = {"log_level": log_level, "log_format": log_format}
    ctx.obj = CliState(config=config, overrides=overrides)


def main() -> None:
    """The console script `scheduler`."""
    cli.main(prog_name="scheduler")
