"""The code examples of the package's docstrings run as pasted.

An example is a block introduced by a line ending in `::` (reStructuredText's literal block)
whose first line imports something: the shape of a runnable snippet, unlike the data layouts
some docstrings show the same way. Each runs in a fresh directory with no `SCHEDULER_*`
setting, in a process of its own; functions named `test_*` it defines are called, since such an
example is a test module to copy.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import scheduler

RUN_TESTS = """
for _name, _value in list(globals().items()):
    if _name.startswith("test_") and callable(_value):
        _value()
"""


def docstrings() -> list[tuple[str, str]]:
    """(where, docstring) for every module of the package and its public classes and functions."""
    found = [("scheduler", scheduler.__doc__ or "")]
    for module_info in pkgutil.walk_packages(scheduler.__path__, "scheduler."):
        if ".bench" in module_info.name or module_info.name.endswith("_speedups"):
            continue
        try:
            module = importlib.import_module(module_info.name)
        except ImportError:  # an optional dependency this environment lacks
            continue
        found.append((module_info.name, module.__doc__ or ""))
        for name, member in vars(module).items():
            if name.startswith("_") or getattr(member, "__module__", None) != module.__name__:
                continue
            if inspect.isclass(member) or inspect.isfunction(member):
                found.append((f"{module.__name__}.{name}", member.__doc__ or ""))
    return found


def examples(text: str) -> list[str]:
    lines = text.splitlines()
    blocks = []
    for index, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        body = []
        for following in lines[index + 1 :]:
            if following.strip() and not following.startswith((" ", "\t")):
                break
            body.append(following)
        code = textwrap.dedent("\n".join(body)).strip()
        if code.startswith(("from ", "import ")):
            blocks.append(code)
    return blocks


EXAMPLES = [(where, code) for where, text in docstrings() for code in examples(text)]


def test_the_public_modules_have_examples_to_run():
    where = {place for place, _ in EXAMPLES}
    assert {"scheduler", "scheduler.testing"} <= where


@pytest.mark.parametrize(("where", "code"), EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_the_docstring_example_runs_as_pasted(where, code, tmp_path):
    ast.parse(code)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SCHEDULER_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-c", code + "\n" + RUN_TESTS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{where}:\n{code}\n{done.stdout}{done.stderr}"
