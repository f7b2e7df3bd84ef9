"""`--help` works for every command, and the console script is installed."""

from __future__ import annotations

import click
import pytest

from scheduler.cli.main import cli


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    context = click.Context(group)
    paths = []
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is None:
            continue
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths += command_paths(command, (*prefix, name))
    return paths


ALL_COMMANDS = command_paths(cli)


def test_every_promised_command_exists():
    for path in [("worker",), ("enqueue",), ("enqueue-many",), ("tasks", "list"), ("tasks", "show"),
                 ("tasks", "retry"), ("tasks", "drop"), ("tasks", "cancel"), ("schema", "apply"),
                 ("group", "status"), ("topic", "create"), ("topic", "move"), ("example", "run"),
                 ("services", "kafka-tool"),
                 ("settings", "show"), ("settings", "docs"), ("malformed", "list"),
                 ("malformed", "show"), ("malformed", "drop")]:  # fmt: skip
        assert path in ALL_COMMANDS


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=" ".join)
def test_help_works_for(run, path, monkeypatch):
    monkeypatch.setenv("SCHEDULER_LOG", "broken")  # help must not need valid settings
    result = run(*path, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output


def test_the_console_script_prints_help(script):
    result = script("--help")
    assert result.returncode == 0
    assert "enqueue" in result.stdout and "tasks" in result.stdout
