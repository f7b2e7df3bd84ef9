"""The README's shell walk-through, run as written: its first lines (the executor, a worker, an
enqueue, the listing) must work in a fresh directory, as a new user types them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from tests.cli.conftest import SCRIPT
from tests.cli.helpers import wait_for

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_shell_lines() -> list[list[str]]:
    """The commands of the README's "From the shell" block, each split as the shell would."""
    text = README.read_text("utf-8")
    block = text[text.index("From the shell:") :]
    block = block[block.index("```bash\n") + len("```bash\n") :]
    block = block[: block.index("```")]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def test_the_readme_walk_through_runs_a_task_in_a_fresh_directory(tmp_path, monkeypatch):
    lines = readme_shell_lines()
    export, worker_line, enqueue_line = lines[:3]
    listing = next(line for line in lines if line[1:3] == ["tasks", "list"])
    assert export[0] == "export" and worker_line[-1] == "&"
    name, _, value = export[1].partition("=")
    env = {**os.environ, name: value}
    monkeypatch.chdir(tmp_path)

    def scheduler(line: list[str]) -> list[str]:
        assert line[0] == ".venv/bin/scheduler", line
        return [SCRIPT, *line[1:]]

    worker = subprocess.Popen(
        scheduler(worker_line[:-1]), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        enqueued = subprocess.run(
            scheduler(enqueue_line), env=env, capture_output=True, text=True, timeout=60
        )
        assert enqueued.returncode == 0, enqueued.stderr

        def states() -> list[str]:
            listed = subprocess.run(
                [*scheduler(listing), "--json"], env=env, capture_output=True, text=True, timeout=60
            )
            assert listed.returncode == 0, listed.stderr
            return [row["state"] for row in json.loads(listed.stdout)]

        assert wait_for(lambda: states() == ["succeeded"], timeout=60), states()
    finally:
        worker.terminate()
        output = worker.communicate(timeout=60)[0].decode()
    assert worker.returncode == 0, output
