"""The opaque run cursors the API, the dashboard and `scheduler runs list` hand out."""

from __future__ import annotations

import base64
import json

import pytest

from scheduler.programs.cursor import decode_run_cursor, encode_run_cursor


def test_a_cursor_reads_back_as_the_run_it_was_made_from() -> None:
    cursor = (1_767_225_600_000, "0b6f2c9e-run")
    assert decode_run_cursor(encode_run_cursor(cursor)) == cursor


def _encoded(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


@pytest.mark.parametrize(
    "text",
    [
        "not-a-cursor",
        "é",
        _encoded([1, 2, 3]),
        _encoded(["1", "run"]),
        _encoded([True, "run"]),
        _encoded([1.5, "run"]),
        _encoded([10**30, "run"]),
        _encoded([-1, "run"]),
        _encoded({"a": 1, "b": 2}),
    ],
)
def test_anything_else_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="is not a `next_cursor` of a runs listing"):
        decode_run_cursor(text)
