"""A job's partitions as a pure state: run ends, retention and reruns."""

from __future__ import annotations

import pytest

from scheduler.batch import (
    Outcome,
    PartitionStateError,
    Status,
    apply_retention,
    finish,
    format_partition,
    rerun,
    retention_cutoff,
    runnable,
    start,
    summary,
    view,
)
from tests.batch.helpers import P, config, drive, fresh, seed_job

LATER = P("2026-01-01 00:00:00")


def test_a_year_of_monthly_partitions_keeps_the_history_of_the_last_seven() -> None:
    # The seed's applyRetention1: monthly over 2000, retention 6 months, 7 records remain.
    cfg = config(
        seed_job(
            "job1",
            end_partition="2001-01-01 00:00:00",
            increment="1 months",
            retention="6 months",
        ),
        max_parallelism=1,
    )
    states = fresh(cfg)
    history = drive(cfg, states, LATER)
    assert len(history) == 12
    states["job1"], cutoff = apply_retention(cfg.jobs[0], states["job1"], LATER)
    assert cutoff is not None and format_partition(cutoff) == "2000-06-01 00:00:00"
    kept = [partition for _, partition, _ in history if P(partition) >= cutoff]
    assert len(kept) == 7
    # The outcome outlives the history: a dependant still sees January done.
    assert view(cfg, states, "job1", P("2000-01-01 00:00:00"), LATER).status is Status.SUCCEEDED


def test_retention_counts_from_the_newest_due_partition_not_from_now() -> None:
    cfg = config(seed_job("job1", retention="2 hours"))
    states = fresh(cfg)
    assert retention_cutoff(cfg.jobs[0], states["job1"], P("2000-01-01 00:30:00")) is None
    cutoff = retention_cutoff(cfg.jobs[0], states["job1"], P("2000-01-01 05:30:00"))
    assert cutoff == P("2000-01-01 02:00:00")  # newest due: 04:00
    assert retention_cutoff(cfg.jobs[0], states["job1"], LATER) == P("2000-01-01 21:00:00")


def test_retention_never_touches_waiting_running_or_retrying_partitions() -> None:
    cfg = config(seed_job("job1", retention="1 hours", max_parallelism=1))
    states = fresh(cfg)
    p0, p1 = P("2000-01-01 00:00:00"), P("2000-01-01 01:00:00")
    states["job1"] = start(states["job1"], cfg.jobs[0], p0, LATER)
    states["job1"], _ = finish(states["job1"], p0, False, LATER)  # retrying
    states["job1"] = start(states["job1"], cfg.jobs[0], p1, LATER)  # running
    before = states["job1"]
    after, cutoff = apply_retention(cfg.jobs[0], before, LATER)
    assert cutoff == P("2000-01-01 22:00:00")
    assert after == before
    # ... and partitions older than the retention still run: catch-up is not retention.
    assert view(cfg, {"job1": after}, "job1", P("2000-01-01 02:00:00"), LATER).status is (
        Status.RUNNABLE
    )


def test_a_partition_that_failed_for_good_is_removed_by_retention_and_blocks_for_ever() -> None:
    cfg = config(
        seed_job("up", max_attempts=1, retention="2 hours"),
        seed_job("down", dependencies=[{"name": "up", "shift": "0 hours"}]),
    )
    states = fresh(cfg)
    drive(cfg, states, P("2000-01-01 02:00:00"), succeeds=lambda job, p: job != "up")
    states["up"], _ = apply_retention(cfg.jobs[0], states["up"], LATER)
    assert view(cfg, states, "up", P("2000-01-01 00:00:00"), LATER).status is Status.REMOVED
    seen = view(cfg, states, "down", P("2000-01-01 00:00:00"), LATER)
    assert seen.status is Status.BLOCKED_FOREVER
    assert seen.reason == (
        "up 2000-01-01 00:00:00 is REMOVED (failed for good; retention deleted its record)"
    )
    assert summary(cfg, states, "up", LATER).removed == 2


def test_marked_success_unblocks_dependants_and_stays_distinguishable() -> None:
    cfg = config(
        seed_job("up", on_failure="mark_success"),
        seed_job("down", dependencies=[{"name": "up", "shift": "0 hours"}]),
    )
    states = fresh(cfg)
    history = drive(cfg, states, LATER, succeeds=lambda job, p: job != "up")
    assert {outcome for job, _, outcome in history if job == "up"} == {Outcome.MARKED_SUCCESS}
    assert summary(cfg, states, "down", LATER).succeeded == 24
    counts = summary(cfg, states, "up", LATER)
    assert (counts.succeeded, counts.marked_success) == (0, 24)
    assert view(cfg, states, "up", P("2000-01-01 00:00:00"), LATER).status is (
        Status.MARKED_SUCCESS
    )


def test_a_command_that_cannot_start_is_a_failed_run_with_its_reason() -> None:
    cfg = config(seed_job("job1", retry_delay="1000 years"))
    states, p0 = fresh(cfg), P("2000-01-01 00:00:00")
    states["job1"] = start(states["job1"], cfg.jobs[0], p0, LATER)
    reason = "cannot start 'something invalid': No such file or directory"
    states["job1"], outcome = finish(states["job1"], p0, False, LATER, reason)
    assert outcome is Outcome.RETRY
    seen = view(cfg, states, "job1", p0, LATER)
    assert (seen.status, seen.reason) == (Status.FAILED, reason)


@pytest.mark.parametrize("twice", ["start", "finish"])
def test_a_partition_never_has_two_runs_and_a_run_ends_once(twice: str) -> None:
    cfg = config(seed_job("job1"))
    states, p0 = fresh(cfg), P("2000-01-01 00:00:00")
    state = start(states["job1"], cfg.jobs[0], p0, LATER)
    with pytest.raises(PartitionStateError):
        if twice == "start":
            start(state, cfg.jobs[0], p0, LATER)
        else:
            finish(finish(state, p0, True, LATER)[0], p0, True, LATER)


def test_a_rerun_runs_chosen_partitions_again_even_marked_ones() -> None:
    cfg = config(seed_job("job1", on_failure="mark_success"))
    states = fresh(cfg)
    drive(cfg, states, LATER, succeeds=lambda job, p: False)
    states["job1"] = rerun(states["job1"], P("2000-01-01 05:00:00"), P("2000-01-01 07:00:00"))
    found = [format_partition(run.partition) for run in runnable(cfg, states, LATER)]
    assert found == ["2000-01-01 05:00:00", "2000-01-01 06:00:00"]


def test_a_failure_newer_than_the_retention_cutoff_keeps_its_record() -> None:
    cfg = config(seed_job("job1", max_attempts=1, retention="2 hours"))
    states = fresh(cfg)
    drive(cfg, states, LATER, succeeds=lambda job, p: False)
    states["job1"], _ = apply_retention(cfg.jobs[0], states["job1"], LATER)
    old = view(cfg, states, "job1", P("2000-01-01 00:00:00"), LATER)
    recent = view(cfg, states, "job1", P("2000-01-01 22:00:00"), LATER)
    assert (old.status, recent.status) == (Status.REMOVED, Status.FAILED)
