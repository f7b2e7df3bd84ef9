"""What every subcommand shares: the settings (loaded once, lazily) and the opened backends.

Settings are loaded on first use, not by the group, so that `--help` and `settings docs` work
even while the environment or the settings file is broken, and so that a subcommand can add its
own options (`worker --metrics-port`) on top before anything is read.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from scheduler.logs.abc import TaskLog
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    """The group's options, and the settings once a subcommand asked for them."""

    config: Path | None
    """`--config`, or None for `$SCHEDULER_CONFIG` (or no file)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Settings given as command-line options; None values mean "not given"."""
    _settings: Settings | None = None

    def settings(self, **overrides: Any) -> Settings:
        """The effective settings, with this subcommand's options on top; logs configured."""
        if self._settings is None:
            from scheduler.config import load_settings, unknown_environment
            from scheduler.logging_setup import configure_logging

            self.overrides.update(overrides)
            self._settings = load_settings(self.config, self.overrides)
            configure_logging(
                self._settings.log_level,
                self._settings.log_format,
                task_level=self._settings.task_log_level,
            )
            for warning in unknown_environment():
                click.secho(f"warning: {warning}", err=True, fg="yellow")
        return self._settings

    def origin(self, name: str) -> str:
        """How errors should name where setting `name` came from (`--executor`, the variable,
        the settings file's key), so that the user fixes the value where they wrote it."""
        from scheduler.config import origin

        return origin(name, self.config, self.overrides)


def pass_state(function: F) -> F:
    """Give a command the `CliState` (a fresh one when the command runs outside the group)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        state = click.get_current_context().find_object(CliState) or CliState(config=None)
        return function(state, *args, **kwargs)

    return functools.update_wrapper(wrapper, function)  # type: ignore[return-value]


@contextmanager
def backends(settings: Settings, *, check: bool = True) -> Iterator[tuple[TaskLog, TaskStore]]:
    """The log and the opened store, checked to agree on the partition count, then closed."""
    from scheduler.logging_setup import ExpectedTombstoneWarnings
    from scheduler.runtime import open_existing, partition_count_check

    with ExitStack() as stack:
        driver_log = logging.getLogger(ExpectedTombstoneWarnings.LOGGER)
        expected = ExpectedTombstoneWarnings()
        driver_log.addFilter(expected)
        stack.callback(driver_log.removeFilter, expected)
        log, store = open_existing(settings)
        stack.callback(log.close)
        stack.callback(store.close)
        if check:
            partition_count_check(log, store, settings.partitions, create_topic=False)
        yield log, store


def echo_err(message: str) -> None:
    """A note for the operator on stderr, so that stdout stays parseable (`--json`)."""
    click.secho(message, err=True, fg="yellow")
