"""The README's examples, run as pasted in a fresh directory: its shell walk-through line by line
(the export, a worker in the background, every command), its Python blocks, and its operator
commands, which take the reader's values and are checked to be commands the CLI accepts."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import SCRIPT
from tests.cli.helpers import parse_command_line, wait_for

README = Path(__file__).resolve().parents[2] / "README.md"
PLACEHOLDER = re.compile(r"<[^<>]+>")


def readme_blocks(language: str) -> list[str]:
    """The README's fenced blocks in `language`, in order."""
    return re.findall(rf"```{language}\n(.*?)```", README.read_text("utf-8"), re.S)


def walk_through() -> list[str]:
    """The lines of the "From the shell" block: the one shell block without placeholders."""
    [block] = [b for b in readme_blocks("bash") if ".venv/bin/scheduler worker &" in b]
    return [line for line in block.splitlines() if line.strip()]


def operator_commands() -> list[list[str]]:
    """The shell lines that take the reader's values, each split as the shell would."""
    return [
        shlex.split(line, comments=True)
        for block in readme_blocks("bash")
        for line in block.splitlines()
        if PLACEHOLDER.search(line) and line.startswith(".venv/bin/scheduler")
    ]


@pytest.fixture
def fresh_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A new user's directory: `.venv/bin/scheduler` is the installed script, nothing else."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "scheduler").symlink_to(SCRIPT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_walk_through_runs_as_pasted_in_a_fresh_directory(fresh_directory):
    env = dict(os.environ)
    background: list[subprocess.Popen[bytes]] = []
    try:
        for line in walk_through():
            words = shlex.split(line, comments=True)
            if words[0] == "export":
                name, _, value = words[1].partition("=")
                env[name] = value
            elif words[-1] == "&":
                background.append(
                    subprocess.Popen(
                        ["bash", "-c", "exec " + shlex.join(words[:-1])],
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                    )
                )
            else:
                done = subprocess.run(
                    ["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60
                )
                assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"

        def states(ordering_id: str) -> list[str]:
            listed = subprocess.run(
                [".venv/bin/scheduler", "tasks", "list", "--ordering-id", ordering_id, "--json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert listed.returncode == 0, listed.stderr
            return [row["state"] for row in json.loads(listed.stdout)]

        assert wait_for(lambda: states("orders-42") == ["succeeded"], timeout=60)
        assert wait_for(lambda: states("orders-43") == ["pending"], timeout=30)
    finally:
        for process in background:
            process.terminate()
            output = process.communicate(timeout=60)[0].decode()
            assert process.returncode == 0, output


@pytest.mark.parametrize("line", operator_commands(), ids=shlex.join)
def test_each_readme_operator_command_is_one_the_cli_accepts(line):
    assert line[0] == ".venv/bin/scheduler"
    example = {"<time>": "2027-01-31T14:00:00Z"}
    filled = [PLACEHOLDER.sub(lambda m: example.get(m[0], "x"), word) for word in line[1:]]
    assert parse_command_line(filled)


def test_the_readme_has_operator_commands_to_check():
    assert len(operator_commands()) >= 2


def test_the_readme_python_blocks_run_as_pasted_one_after_the_other(fresh_directory):
    blocks = readme_blocks("python")
    assert len(blocks) >= 2
    outputs = []
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{block}\n{done.stdout}{done.stderr}"
        outputs.append(done.stdout)
    assert "reminding 42 for " in outputs[0]
