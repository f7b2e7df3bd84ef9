"""`cassandra_schema.slices`: the bounds of the range reads that cover a span of the schedule."""

from __future__ import annotations

from itertools import pairwise

import pytest

from scheduler.config import load_settings
from scheduler.errors import ConfigurationError
from scheduler.runtime import build_store
from scheduler.stores.cassandra import CassandraTaskStore
from scheduler.stores.cassandra_schema import slices


def test_a_read_shorter_than_a_slice_is_one_query_from_the_cursor() -> None:
    cursor = (61_500, "oid", "u1")
    assert list(slices(cursor, 62_000, 60_000)) == [(cursor, 62_000)]


def test_a_long_read_is_split_at_multiples_of_the_width_and_covers_every_millisecond() -> None:
    cursor = (59_000, "oid", "u1")
    spans = list(slices(cursor, 200_000, 60_000))
    assert spans == [
        (cursor, 60_000),
        ((60_000, "", ""), 120_000),
        ((120_000, "", ""), 180_000),
        ((180_000, "", ""), 200_000),
    ]
    # No gap: each read starts where the previous stopped (`> (ms, "", "")` is `>= ms`).
    for (_, below), (after, _) in pairwise(spans):
        assert after == (below, "", "")


def test_rows_left_in_the_cursor_millisecond_are_read_and_nothing_past_below() -> None:
    assert list(slices((999, "o", "u"), 1000, 60_000)) == [((999, "o", "u"), 1000)]
    assert list(slices((1000, "", ""), 1000, 60_000)) == []


def test_times_before_1970_slice_the_same_way() -> None:
    spans = list(slices((-90_000, "", ""), 0, 60_000))
    assert spans == [((-90_000, "", ""), -60_000), ((-60_000, "", ""), 0)]


def test_the_setting_reaches_the_store_and_a_bad_one_names_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("SCHEDULER_STORE", "cassandra")
    monkeypatch.setenv("SCHEDULER_CASSANDRA_READ_SLICE_S", "2.5")
    store = build_store(load_settings())
    assert isinstance(store, CassandraTaskStore) and store.read_slice_ms == 2500

    monkeypatch.setenv("SCHEDULER_CASSANDRA_READ_SLICE_S", "0")
    with pytest.raises(ConfigurationError, match="SCHEDULER_CASSANDRA_READ_SLICE_S='0'"):
        load_settings()
