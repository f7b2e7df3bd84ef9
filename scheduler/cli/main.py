"""The `scheduler` command: a click group whose subcommands are imported only when used.

Lazy loading keeps `scheduler --help` and `scheduler enqueue` quick, and lets a subcommand that
is not written yet (or whose optional dependencies are missing) fail alone instead of breaking
the whole command. Errors the product raises on purpose (`SchedulerError`) become one red line
on stderr and the exit status `exit_codes.CODES` gives them, never a traceback; anything else is
a bug and keeps its traceback. A Ctrl-C before a command finished is one line too.
"""

from __future__ import annotations

import difflib
import importlib
from pathlib import Path
from typing import Any

import click
from click.exceptions import NoSuchCommand

from scheduler.cli import exit_codes
from scheduler.cli.context import CliState
from scheduler.errors import SchedulerError

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
    "schedules": "scheduler.cli.schedules:schedules",
    "jobs": "scheduler.cli.jobs:jobs",
    "api": "scheduler.cli.api:api",
    "chaos": "scheduler.cli.chaos:chaos",
}
"""Subcommand name -> `module:attribute` of its click command."""

EXIT_USAGE = exit_codes.USAGE
EXIT_BACKEND = exit_codes.BACKEND_UNAVAILABLE


class CliError(click.ClickException):
    """A `SchedulerError` on its way to the terminal: one red line, its exit status."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        setattr(self, "exit_code", exit_code)  # noqa: B010  (click declares it a ClassVar)

    def show(self, file: Any = None) -> None:
        click.secho(f"error: {self.format_message()}", err=True, fg="red")


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

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except NoSuchCommand as error:
            raise _with_suggestion(error) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SchedulerError as error:
            raise CliError(str(error), exit_codes.exit_code(error)) from error
        except KeyboardInterrupt:
            raise CliError(
                "interrupted (Ctrl-C) before the command finished", exit_codes.INTERRUPTED
            ) from None
        except NoSuchCommand as error:  # a subgroup's (`scheduler tasks lst`)
            raise _with_suggestion(error) from None


def _with_suggestion(error: NoSuchCommand) -> click.UsageError:
    """`error` with the closest command of its group named: `Did you mean 'tasks'?`."""
    group, context = (error.ctx.command, error.ctx) if error.ctx else (None, None)
    if not isinstance(group, click.Group) or context is None:
        return error
    if "did you mean" in error.message.lower():
        return error
    names = group.list_commands(context)
    close = difflib.get_close_matches(error.command_name, names, n=1, cutoff=0.6)
    if not close:
        return error
    return click.UsageError(f"{error.message} Did you mean {close[0]!r}?", context)


@click.group(
    cls=SchedulerGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=exit_codes.EPILOG,
)
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
      scheduler worker &
      scheduler enqueue orders-42 --in 5s
      scheduler enqueue orders-42 --in 5m --data '{"executor": "command", "argv": ["echo", "hi"]}'
      scheduler tasks list --ordering-id orders-42
      scheduler group status
    """
    overrides = {"log_level": log_level, "log_format": log_format}
    ctx.obj = CliState(config=config, overrides=overrides)


def main() -> None:
    """The console script `scheduler`."""
    cli.main(prog_name="scheduler")
