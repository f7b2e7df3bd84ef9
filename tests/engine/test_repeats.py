"""Repeated failures of partitions, said together once a minute (scheduler.engine.repeats)."""

from __future__ import annotations

import logging

import pytest

from scheduler.engine.repeats import RepeatedFailures


def test_repeats_are_said_together_once_a_minute_after_the_first_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [1000.0]
    repeats = RepeatedFailures(
        logging.getLogger("scheduler.test"),
        "partitions {partitions} failed again {count} times in the last {seconds:.0f} s "
        "(the latest: {error})",
        clock=lambda: now[0],
    )
    error = RuntimeError("store down")

    def said() -> list[str]:
        lines = [r.getMessage() for r in caplog.records if "failed again" in r.getMessage()]
        caplog.clear()
        return lines

    for second in range(0, 60, 5):  # partitions 0 and 1, every 5 s, for a minute
        now[0] = 1000.0 + second
        repeats.failed_again(second % 2, error)
    assert said() == []  # their first failures were logged just before, one line each
    now[0] = 1060.0
    repeats.failed_again(3, error)
    assert said() == [
        "partitions [0, 1, 3] failed again 13 times in the last 60 s (the latest: RuntimeError: "
        "store down); this is said once a minute"
    ]
    now[0] = 1100.0
    repeats.failed_again(0, error)
    assert said() == []  # within the minute
    now[0] = 1000.0 + 3600  # an hour later, a new spell: its first repeat is not said at once
    repeats.failed_again(2, error)
    assert said() == []
    now[0] += 60
    repeats.failed_again(2, error)
    assert said() == [
        "partitions [2] failed again 2 times in the last 60 s (the latest: RuntimeError: store "
        "down); this is said once a minute"
    ]
