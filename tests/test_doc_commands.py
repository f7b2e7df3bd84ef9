"""Every `scheduler ...` command the README and docs/ show exists, with the options they give it.
Commands get renamed and options dropped; a page that tells a reader to type one that is gone
costs them the next ten minutes."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from scheduler.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

# `scheduler ...` in a code span, or a line of a fenced block that starts with it.
_SPAN = re.compile(r"`(?:\.venv/bin/)?scheduler ([^`]+)`")
_LINE = re.compile(r"^\s*(?:\$ )?(?:\.venv/bin/)?scheduler (.+)$")
_CTX = click.Context(cli)
_GLOBAL = {name for param in cli.params for name in (*param.opts, *param.secondary_opts)}


def _shown(page: Path) -> list[tuple[int, str]]:
    """(line number, the words after `scheduler`) of each command the page shows, without a
    shell comment, pipe or `&` after it."""
    found = []
    for number, line in enumerate(page.read_text("utf-8").splitlines(), 1):
        found += [(number, m.group(1)) for m in _SPAN.finditer(line)]
        if match := _LINE.match(line):
            found.append((number, re.split(r"\s(?:#|\||&|>|;)", match.group(1))[0]))
    return [(number, text) for number, text in found if text.strip()]


def _notation(word: str) -> bool:
    """A placeholder or a choice (`<name>`, `FILE`, `enable|disable`), not a literal word."""
    return any(mark in word for mark in "<|[") or word.isupper()


def _problem(words: list[str]) -> str | None:
    """What is wrong with the command `scheduler WORDS`, if anything."""
    command: click.Command = cli
    rest = iter(words)
    for word in rest:
        if not isinstance(command, click.Group):
            break
        if word.startswith("-") or _notation(word):
            return None
        sub = command.get_command(_CTX, word)
        if sub is None:
            return f"{command.name} has no command {word!r}"
        command = sub
    else:
        return None
    if any(arg.nargs == -1 for arg in command.params if isinstance(arg, click.Argument)):
        return None  # passes its arguments on (`services kafka-tool ...`)
    known = _GLOBAL | {"--help", "-h"}
    known |= {name for param in command.params for name in (*param.opts, *param.secondary_opts)}
    for word in (w for w in words if w.startswith("--")):
        option = word.split("=")[0].rstrip(".,;:)")
        if option != "--" and option not in known:
            return f"{command.name} has no option {option}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_commands_a_page_shows_exist(page: Path) -> None:
    top = set(cli.list_commands(_CTX))
    wrong = [
        f"{page.name}:{number}: `scheduler {text}`: {problem}"
        for number, text in _shown(page)
        if text.split()[0] in top and (problem := _problem(text.split())) is not None
    ]
    assert not wrong, "\n".join(wrong)
