"""`--help` works for every command, and the console script is installed."""

from __future__ import annotations

import json
import shlex
import subprocess

import click
import pytest

from scheduler.cli.main import cli
from tests.cli.conftest import SCRIPT
from tests.cli.helpers import parse_command_line, wait_for


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


def help_text(path: tuple[str, ...]) -> str:
    context = click.Context(cli, info_name="scheduler")
    command: click.Command = cli
    for name in path:
        found = command.get_command(context, name)  # type: ignore[attr-defined]
        assert found is not None
        command, context = found, click.Context(found, info_name=name, parent=context)
    return command.get_help(context)


def help_examples(path: tuple[str, ...]) -> list[str]:
    """The command lines a help page shows (`scheduler ...`), comments dropped."""
    return [
        line.strip()
        for line in help_text(path).splitlines()
        if line.strip().startswith("scheduler ")
        and not line.strip().startswith("scheduler topic move of")  # bench move's sentence
    ]


EXAMPLES = [(path, line) for path in [(), *ALL_COMMANDS] for line in help_examples(path)]


def test_the_main_help_and_enqueue_show_examples():
    assert len(help_examples(())) >= 4 and len(help_examples(("enqueue",))) >= 2


@pytest.mark.parametrize(("path", "line"), EXAMPLES, ids=[line for _, line in EXAMPLES])
def test_every_help_example_is_a_command_line_the_cli_accepts(path, line):
    words = shlex.split(line, comments=True)
    words = words[:-1] if words[-1] == "&" else words
    assert parse_command_line(words[1:])[: len(path)] == list(path)


def test_the_examples_of_scheduler_help_and_enqueue_help_run_as_pasted(
    tmp_path, monkeypatch, script
):
    """With the default executor (auto), in a fresh directory: the worker runs the bare task
    (empty data: nothing to run, it succeeds) and every other line is accepted."""
    monkeypatch.chdir(tmp_path)
    lines = help_examples(()) + help_examples(("enqueue",))
    [worker_line] = [line for line in lines if line.endswith("&")]
    worker = subprocess.Popen(
        [SCRIPT, *shlex.split(worker_line)[1:-1]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        for line in lines:
            if line != worker_line:
                done = script(*shlex.split(line)[1:])
                assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"

        def states() -> list[str]:
            listed = script("tasks", "list", "--ordering-id", "orders-42", "--json")
            return [row["state"] for row in json.loads(listed.stdout or "[]")]

        # The bare ones (--in 5s, and now) ran; the dated one and the commands wait.
        assert wait_for(lambda: states().count("succeeded") == 2, timeout=60), states()
        assert sorted(set(states())) == ["pending", "succeeded"]
    finally:
        worker.terminate()
        output = worker.communicate(timeout=60)[0].decode()
    assert worker.returncode == 0, output


def test_the_lines_of_enqueue_many_help_are_a_file_it_accepts(script, embedded, tmp_path):
    lines = [
        line.strip()
        for line in help_text(("enqueue-many",)).splitlines()
        if line.strip().startswith('{"ordering_id"')
    ]
    assert len(lines) == 2
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    sent = script("enqueue-many", str(path), "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["tasks"] == 2
