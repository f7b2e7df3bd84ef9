"""Helpers shared by the CLI tests."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

import psutil

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float = 60.0) -> T:
    """Call `check` until it returns something true or `timeout` passes; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def parse_command_line(args: list[str]) -> list[str]:
    """Parse `args` (without the leading `scheduler`) the way the CLI would, down to the last
    subcommand, without running anything; the path of commands. Raises click's UsageError for
    an unknown command or option, a missing argument or a bad value."""
    import click

    from scheduler.cli.main import cli

    command: click.Command = cli
    name, parent, path = "scheduler", None, []
    while True:
        context = command.make_context(name, list(args), parent=parent)
        if not isinstance(command, click.Group):
            return path
        rest = [*context._protected_args, *context.args]
        found_name, found, args = command.resolve_command(context, rest)
        assert found is not None and found_name is not None
        command, name, parent = found, found_name, context
        path.append(found_name)


def watcher_of(worker: subprocess.Popen[str]) -> psutil.Process:
    """The process that stops `worker`'s commands if it dies (`left_running.watch`)."""
    (watcher,) = [
        child
        for child in psutil.Process(worker.pid).children()
        if "left_running.py" in " ".join(child.cmdline())
    ]
    return watcher


def ended(process: psutil.Process) -> bool:
    """Whether `process` is gone or a zombie (dead; reaped by whoever is its parent now)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
