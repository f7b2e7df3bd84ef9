"""One printed form of a task key, which the parser reads back (`scheduler.key_format`)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduler.errors import InvalidTaskKeyError
from scheduler.model import TaskKey

MOMENT = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def test_a_key_prints_with_its_time_in_iso_8601_utc_with_milliseconds():
    key = TaskKey("orders-44", MOMENT, "9fca")
    assert str(key) == "orders-44/2026-11-22T10:00:00.000Z/9fca"
    assert repr(key) == "TaskKey.parse('orders-44/2026-11-22T10:00:00.000Z/9fca')"


@pytest.mark.parametrize(
    ("ordering_id", "uniqueness_key"),
    [
        ("orders-44", "9fca"),
        ("clicks/eu/2026", "run/1/2"),
        ("schedule:nightly", "fire:2026-11-22T10:00:00Z"),
        ("a b", "ünïcode key"),
        ("x/1795732512000", "1795732512001/y"),
    ],
)
def test_every_printed_key_parses_back_to_itself(ordering_id, uniqueness_key):
    key = TaskKey(ordering_id, MOMENT, uniqueness_key)
    assert TaskKey.parse(str(key)) == key


def test_the_epoch_millisecond_form_of_older_logs_is_accepted():
    key = TaskKey("orders-44", MOMENT, "9fca")
    assert TaskKey.parse(f"orders-44/{key.scheduled_ms}/9fca") == key


def test_a_time_in_another_zone_names_the_same_instant():
    assert TaskKey.parse("o/2026-11-22T11:00:00+01:00/u") == TaskKey("o", MOMENT, "u")


def test_a_text_that_splits_two_ways_is_refused_naming_both_readings():
    with pytest.raises(InvalidTaskKeyError, match=r"in 2 ways.*'a'.*'a/1'.*separate arguments"):
        TaskKey.parse("a/1/2/b")


def test_a_text_without_a_time_says_how_a_key_is_written():
    with pytest.raises(InvalidTaskKeyError, match="ORDERING_ID/TIME/UNIQUENESS_KEY"):
        TaskKey.parse("orders-44 9fca")


def test_a_time_without_a_zone_is_refused_rather_than_guessed():
    with pytest.raises(InvalidTaskKeyError, match=r"has no time zone; add one, e.g. .*Z"):
        TaskKey.parse("o/2026-11-22T10:00:00/u")


def test_an_impossible_date_is_named():
    with pytest.raises(InvalidTaskKeyError, match="'2026-13-01T00:00:00Z' is not a time"):
        TaskKey.parse("o/2026-13-01T00:00:00Z/u")


def test_an_empty_part_is_refused_like_an_empty_key_part():
    with pytest.raises(InvalidTaskKeyError, match="uniqueness_key is empty"):
        TaskKey.parse("o/2026-11-22T10:00:00.000Z/")


def test_an_epoch_time_past_year_9999_is_out_of_range():
    with pytest.raises(InvalidTaskKeyError, match="out of range"):
        TaskKey.parse("o/999999999999999999/u")
