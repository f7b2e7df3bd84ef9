"""Run ids: derived from the program and the request key, the same forever."""

from __future__ import annotations

import uuid

import pytest

from scheduler.programs.model import RUN_NAMESPACE, run_id_for


@pytest.mark.parametrize(
    ("program", "request_key"),
    [
        ("clean", "schedule:hourly:1767225600000:0"),
        ("rollup", "operator:6f1c2b0e"),
        ("é-programme", "job:daily/2026-01-01T05" * 20),
        ("", ""),
    ],
)
def test_a_run_id_is_the_uuid5_of_the_program_and_request_key(
    program: str, request_key: str
) -> None:
    expected = uuid.uuid5(RUN_NAMESPACE, f"{program}\x00{request_key}")
    assert run_id_for(program, request_key) == str(expected)
    assert uuid.UUID(run_id_for(program, request_key)).version == 5


def test_a_run_id_made_by_an_earlier_release_is_made_again() -> None:
    # A stored run's id must come out the same, or a re-executed launch would start it twice.
    assert run_id_for("clean", "schedule:hourly:1:0") == "54dff9f3-e47c-5f89-8adb-1ffa807352ab"
