"""Every relative link in README.md, CHANGELOG.md and docs/ leads somewhere: the file exists and,
for `file.md#anchor`, so does a heading with that anchor. Pages get split and renamed; a link
that silently leads nowhere is how a reader loses the one section that answers them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")])

# [text](target) and ![alt](target); a target has no spaces (an optional "title" may follow).
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def _prose(page: Path) -> list[str]:
    """The page's lines outside fenced code blocks (a link-like string in code is code)."""
    lines, fenced = [], False
    for line in page.read_text("utf-8").splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation (code and emphasis marks too)
    dropped but hyphens and underscores kept, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    for line in _prose(page):
        match = _HEADING.match(line)
        if match:
            slug = _slug(match.group(1))
            # GitHub numbers repeated headings: slug, slug-1, slug-2 ...
            anchor, n = slug, 0
            while anchor in anchors:
                n += 1
                anchor = f"{slug}-{n}"
            anchors.add(anchor)
    return anchors


def _links(page: Path) -> list[str]:
    return [target for line in _prose(page) for target in _LINK.findall(line)]


def _broken(page: Path) -> list[str]:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading with that anchor in {file.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    assert _broken(page) == []


def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# The `Other` page: notes\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "See [it](other.md#the-other-page-notes), [again](other.md#twice-1), [top](#top),\n"
        "[gone](missing.md), [wrong](other.md#nowhere), [web](https://example.com/x#y).\n"
        "\n```\n[in code](missing-too.md)\n```\n\n# Top\n"
    )
    assert _broken(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading with that anchor in other.md",
    ]
