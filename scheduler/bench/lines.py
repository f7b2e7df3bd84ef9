"""The line count of "the engine, worker and adapters" of a checkout (issue 40's measure).

Two figures per area: physical lines (everything in the files) and code lines (a line holding at
least one token that is neither a comment nor part of a docstring; blank lines excluded). The
areas are fixed here, so that two checkouts are counted alike whatever their layout: an area a
checkout lacks counts 0.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path
from typing import Any

AREAS = (
    "scheduler/engine",
    "scheduler/actors",
    "scheduler/worker.py",
    "scheduler/runtime.py",
    "scheduler/embedded.py",
    "scheduler/topic_guard.py",
    "scheduler/logs",
    "scheduler/stores",
)
TOTAL = "total"
_NOT_CODE = frozenset(
    (
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    )
)


def _docstring_lines(tree: ast.Module) -> set[int]:
    documented = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, documented) or not node.body:
            continue
        first = node.body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def count_source(source: str) -> tuple[int, int]:
    """(physical lines, code lines) of one Python source."""
    docstrings = _docstring_lines(ast.parse(source))
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in _NOT_CODE:
            continue
        code.update(
            line for line in range(token.start[0], token.end[0] + 1) if line not in docstrings
        )
    return len(source.splitlines()), len(code)


def _files(root: Path, area: str) -> list[Path]:
    path = root / area
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
    return []


def count_checkout(root: Path) -> dict[str, dict[str, Any]]:
    """Per area of `AREAS` and in `TOTAL`: files, physical lines and code lines under `root`."""
    if not (root / "scheduler").is_dir():
        raise FileNotFoundError(f"{root}: not a checkout of this project (no scheduler/ there)")
    counts: dict[str, dict[str, Any]] = {}
    for area in AREAS:
        files = _files(root, area)
        lines = code = 0
        for path in files:
            physical, logical = count_source(path.read_text(encoding="utf-8"))
            lines += physical
            code += logical
        counts[area] = {"files": len(files), "lines": lines, "code": code}
    counts[TOTAL] = {
        key: sum(counts[area][key] for area in AREAS) for key in ("files", "lines", "code")
    }
    return counts


def checkout_of(python_or_checkout: Path) -> Path | None:
    """The checkout a `--against` names: the directory itself, or the one whose
    `.venv/bin/python` it is; None when it is some other interpreter."""
    if python_or_checkout.is_dir():
        return python_or_checkout
    parents = python_or_checkout.parents
    if len(parents) >= 3 and parents[1].name == ".venv":
        return parents[2]
    return None
