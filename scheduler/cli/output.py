"""Tables for people and JSON for scripts: every listing command offers both (`--json`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click


def echo_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    max_width: int = 60,
    empty: str | None = None,
) -> None:
    """Left-aligned columns separated by two spaces; cells longer than `max_width` are cut.
    With no rows, `empty` (what there is none of, and how to get some) follows the header on
    stderr, so that stdout stays the table a script reads."""
    cells = [[_cell(value, max_width) for value in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in cells:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    click.echo(_line(headers, widths))
    for row in cells:
        click.echo(_line(row, widths))
    if not rows and empty:
        click.secho(empty, err=True, fg="yellow")


def echo_json(value: Any) -> None:
    """Indented JSON on stdout; anything JSON cannot hold is written as its string."""
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def _cell(value: Any, max_width: int) -> str:
    text = "-" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()
