"""A job's state survives the store: encoded as JSON and read back the same."""

from __future__ import annotations

import json

import pytest

from scheduler.batch import decode_state, encode_state, finish, start
from tests.batch.helpers import P, config, drive, fresh, seed_job


def test_a_state_with_every_kind_of_record_reads_back_equal() -> None:
    cfg = config(
        seed_job("job1", increment="1 months", end_partition="2001-01-01 00:00:00", max_attempts=2,
                 retry_backoff=1.5, max_retry_delay="2 days", on_failure="retry"),
    )  # fmt: skip
    states = fresh(cfg)
    march, june = P("2000-03-01 00:00:00"), P("2000-06-01 00:00:00")
    drive(cfg, states, june, succeeds=lambda job, partition: partition != march)
    states["job1"] = start(states["job1"], cfg.jobs[0], june, P("2000-07-01 00:00:00"))
    state = states["job1"]
    assert state.running and state.failed and len(state.done) == 4
    text = json.dumps(encode_state(state))
    assert decode_state(json.loads(text)) == state
    again, _ = finish(decode_state(json.loads(text)), june, True, 0)
    assert len(again.done) == 5


def test_a_state_of_a_year_of_hourly_successes_is_a_few_bytes() -> None:
    cfg = config(seed_job("job1", end_partition="2001-01-01 00:00:00"))
    states = fresh(cfg)
    drive(cfg, states, P("2002-01-01 00:00:00"))
    assert len(states["job1"].done) == 8784
    assert len(json.dumps(encode_state(states["job1"]))) < 400


def test_a_state_in_an_unknown_format_is_refused() -> None:
    data = encode_state(fresh(config(seed_job("job1")))["job1"]) | {"format": 99}
    with pytest.raises(ValueError, match="format 99 cannot be read"):
        decode_state(data)
