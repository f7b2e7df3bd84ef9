"""The worker's garbage-collector pace (`scheduler.engine.collector`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from scheduler.engine.collector import (
    CYCLIC_BACKEND_THRESHOLD,
    FIRST_GENERATION_THRESHOLD,
    pace_for_a_worker,
)


@pytest.fixture
def restored_collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_a_worker_collects_its_youngest_generation_less_often_and_keeps_the_older_ratios(
    restored_collector,
):
    _, second, third = gc.get_threshold()
    pace_for_a_worker()
    assert gc.get_threshold() == (FIRST_GENERATION_THRESHOLD, second, third)


def test_what_start_up_made_is_out_of_the_collectors_sight_and_what_runs_later_is_not(
    restored_collector,
):
    made_at_start_up = [["held"]]
    pace_for_a_worker()
    made_later = [["running"]]
    collected = gc.get_objects()
    assert not any(tracked is made_at_start_up for tracked in collected)
    assert any(tracked is made_later for tracked in collected)


def test_a_worker_whose_store_leaves_requests_in_cycles_keeps_the_default_young_pace(
    restored_collector,
):
    _, second, third = gc.get_threshold()
    made_at_start_up = [["held"]]
    pace_for_a_worker(cyclic_requests=True)
    assert gc.get_threshold() == (CYCLIC_BACKEND_THRESHOLD, second, third)
    assert CYCLIC_BACKEND_THRESHOLD < FIRST_GENERATION_THRESHOLD
    assert not any(tracked is made_at_start_up for tracked in gc.get_objects())
