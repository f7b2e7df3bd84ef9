"""A new configuration applied as a diff: back-fill, kept records, untouched runs."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.batch import (
    JobState,
    Status,
    apply,
    diff,
    finish,
    format_partition,
    prune,
    runnable,
    start,
    summary,
    view,
)
from tests.batch.helpers import P, config, drive, fresh, seed_job

LATER = P("2001-01-01 00:00:00")


def records(states: Mapping[str, JobState], job: str) -> list[str]:
    state = states[job]
    return [format_partition(state.grid.at(n)) for n in state.done]


def test_moving_the_start_earlier_back_fills_the_partitions_before_it() -> None:
    # The seed's previousStartPartition: 1 partition, then 48 from a day earlier.
    first = config(
        seed_job("job1", start_partition="2000-01-02 00:00:00", end_partition="2000-01-02 01:00:00")
    )
    states = fresh(first)
    assert len(drive(first, states, LATER)) == 1
    second = config(seed_job("job1", end_partition="2000-01-03 00:00:00"))
    change, states = apply(first, second, states)
    assert change.changed == {"job1": ("start_partition", "end_partition")}
    history = drive(second, states, LATER)
    assert len(history) == 47
    assert "2000-01-02 00:00:00" not in [partition for _, partition, _ in history]
    assert len(records(states, "job1")) == 48


def test_moving_the_start_later_keeps_the_old_records() -> None:
    # The seed's shiftLaterStartPartition: 24 hourly records, then 24 more three days later.
    first = config(seed_job("job1"))
    states = fresh(first)
    assert len(drive(first, states, LATER)) == 24
    second = config(
        seed_job("job1", start_partition="2000-01-04 00:00:00", end_partition="2000-01-05 00:00:00")
    )
    _, states = apply(first, second, states)
    assert len(drive(second, states, LATER)) == 24
    kept = records(states, "job1")
    assert len(kept) == 48
    assert kept[0] == "2000-01-01 00:00:00"
    assert summary(second, states, "job1", LATER).succeeded == 24


def test_a_start_moved_later_by_days_keeps_only_the_old_partition() -> None:
    # The seed's buildNextPartitionIndex1: 2000-01-01 ran, then the job moves to 2000-01-20.
    first = config(seed_job("job1", increment="1 days"))
    states = fresh(first)
    drive(first, states, LATER)
    second = config(
        seed_job(
            "job1",
            increment="1 days",
            start_partition="2000-01-20 00:00:00",
            end_partition="2000-01-21 00:00:00",
        )
    )
    _, states = apply(first, second, states)
    drive(second, states, LATER)
    assert records(states, "job1") == ["2000-01-01 00:00:00", "2000-01-20 00:00:00"]


def test_a_run_in_progress_is_untouched_by_a_reload_and_keeps_its_policy() -> None:
    first = config(seed_job("job1", on_failure="retry"))
    states, p0 = fresh(first), P("2000-01-01 00:00:00")
    states["job1"] = start(states["job1"], first.jobs[0], p0, LATER)
    second = config(seed_job("job1", on_failure="mark_success", max_parallelism=1))
    change, states = apply(first, second, states)
    assert change.changed == {"job1": ("max_parallelism", "on_failure / retry")}
    assert runnable(second, states, LATER) == []  # the run still holds the job's one slot
    states["job1"], _ = finish(states["job1"], p0, False, LATER)
    assert view(second, states, "job1", p0, LATER + 1).status is Status.FAILED


def test_a_removed_job_is_kept_while_its_runs_end_then_pruned() -> None:
    first = config(seed_job("job1"), seed_job("job2"), max_parallelism=2)
    states, p0 = fresh(first), P("2000-01-01 00:00:00")
    states["job2"] = start(states["job2"], first.jobs[1], p0, LATER)
    second = config(seed_job("job1"), max_parallelism=2)
    change, states = apply(first, second, states)
    assert (change.added, change.removed) == ((), ("job2",))
    assert len(runnable(second, states, LATER)) == 1  # job2's run takes a global slot
    states = prune(second, states)
    assert "job2" in states
    states["job2"], _ = finish(states["job2"], p0, True, LATER)
    assert "job2" not in prune(second, states)


def test_a_changed_increment_keeps_the_records_still_on_the_grid() -> None:
    first = config(seed_job("job1"))
    states = fresh(first)
    drive(first, states, LATER)
    second = config(seed_job("job1", increment="2 hours"))
    _, states = apply(first, second, states)
    assert len(records(states, "job1")) == 12
    assert runnable(second, states, LATER) == []


def test_an_unchanged_file_is_an_empty_diff_and_an_added_job_starts_fresh() -> None:
    first = config(seed_job("job1"))
    assert diff(first, config(seed_job("job1", increment="60 minutes"))).is_empty
    second = config(seed_job("job1"), seed_job("job0"), max_parallelism=5)
    change, states = apply(first, second, fresh(first))
    assert change.added == ("job0",)
    assert change.settings_changed == ("max_parallelism",)
    assert summary(second, states, "job0", LATER).pending == 24


def test_a_run_whose_partition_left_the_grid_ends_without_a_record() -> None:
    first = config(seed_job("job1"))
    states, p1 = fresh(first), P("2000-01-01 01:00:00")
    states["job1"] = start(states["job1"], first.jobs[0], p1, LATER)
    second = config(seed_job("job1", increment="2 hours"))
    _, states = apply(first, second, states)
    assert summary(second, states, "job1", LATER).running == 0  # 01:00 is no partition now
    assert len(runnable(second, states, LATER)) == 12  # its run still takes a slot of 100
    state, _ = finish(states["job1"], p1, False, LATER)
    assert (dict(state.running), dict(state.failed), len(state.done)) == ({}, {}, 0)
