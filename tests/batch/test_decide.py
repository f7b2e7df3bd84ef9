"""Which partitions start, in which order, under which limits, and why the others wait."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.batch import (
    Outcome,
    Status,
    finish,
    format_partition,
    parse_configuration,
    runnable,
    start,
    summary,
    view,
    views,
)
from tests.batch.helpers import P, config, drive, fresh, seed_job, start_all

LATER = P("2001-01-01 00:00:00")


def test_job2_never_runs_its_first_partition_and_says_why() -> None:
    # The seed's simpleDependency1: job2 waits for job1 at the same hour and one hour before.
    cfg = config(
        seed_job("job1"),
        seed_job(
            "job2",
            on_failure="mark_success",
            dependencies=[
                {"name": "job1", "shift": "0 seconds"},
                {"name": "job1", "shift": "-1 hours"},
            ],
        ),
        max_parallelism=10,
    )
    states = fresh(cfg)
    history = drive(cfg, states, LATER)
    assert sum(1 for job, _, outcome in history if job == "job1") == 24
    job2 = sorted(partition for job, partition, _ in history if job == "job2")
    assert len(job2) == 23
    assert job2[0] == "2000-01-01 01:00:00"
    first = view(cfg, states, "job2", P("2000-01-01 00:00:00"), LATER)
    assert first.status is Status.BLOCKED_FOREVER
    assert first.reason == "job1 1999-12-31 23:00:00 is before job1's first partition"


def test_the_seed_example_runs_as_its_readme_says() -> None:
    cfg = parse_configuration((Path(__file__).parent / "seed_example.json").read_text())
    states = fresh(cfg)
    history = drive(cfg, states, LATER, succeeds=lambda job, _: job == "job1")
    assert sum(1 for job, _, _ in history if job == "job1") == 48
    job2 = [outcome for job, _, outcome in history if job == "job2"]
    assert job2 == [Outcome.MARKED_SUCCESS] * 47  # sleep 10; false: marked, never retried
    counts = summary(cfg, states, "job2", LATER)
    assert (counts.marked_success, counts.succeeded, counts.pending) == (47, 0, 1)
    assert counts.oldest_pending == P("2000-01-01 00:00:00")


@pytest.mark.parametrize(
    ("global_limit", "job_limit", "started"),
    [(3, 10, 3), (12, 4, 4), (5, 5, 5), (0, 10, 0), (10, 0, 0)],
    ids=["global wins", "per-job wins", "equal", "global 0 pauses all", "job 0 pauses it"],
)
def test_the_tighter_of_the_global_and_the_job_limit_wins(
    global_limit: int, job_limit: int, started: int
) -> None:
    # The seed's maxParallelism1/2: 24 hourly partitions, all due.
    cfg = config(seed_job("job1", max_parallelism=job_limit), max_parallelism=global_limit)
    states = fresh(cfg)
    assert start_all(cfg, states, LATER).get("job1", 0) == started
    assert start_all(cfg, states, LATER).get("job1", 0) == 0  # the slots are taken
    counts = summary(cfg, states, "job1", LATER)
    assert (counts.running, counts.pending) == (started, 24 - started)


def test_the_global_limit_is_shared_oldest_partition_first_across_jobs() -> None:
    cfg = config(
        seed_job("late", start_partition="2000-01-01 10:00:00"),
        seed_job("early"),
        max_parallelism=3,
    )
    launches = runnable(cfg, fresh(cfg), LATER)
    assert [(run.job, format_partition(run.partition)) for run in launches] == [
        ("early", "2000-01-01 00:00:00"),
        ("early", "2000-01-01 01:00:00"),
        ("early", "2000-01-01 02:00:00"),
    ]


def test_equal_partitions_start_in_the_order_the_jobs_are_written() -> None:
    cfg = config(seed_job("b"), seed_job("a"), max_parallelism=2)
    assert [run.job for run in runnable(cfg, fresh(cfg), LATER)] == ["b", "a"]


def test_runs_of_a_job_removed_by_a_reload_still_take_global_slots() -> None:
    cfg = config(seed_job("job1"), max_parallelism=2)
    states = fresh(cfg)
    states["gone"] = start(
        fresh(config(seed_job("gone")))["gone"], cfg.jobs[0], P("2000-01-01 00:00:00"), 0
    )
    assert len(runnable(cfg, states, LATER)) == 1


@pytest.mark.parametrize(
    ("now", "runnable_partitions"),
    [
        ("2000-01-01 00:59:59", []),
        ("2000-01-01 01:00:00", ["2000-01-01 00:00:00"]),
        ("2000-01-01 02:00:00", ["2000-01-01 00:00:00", "2000-01-01 01:00:00"]),
    ],
)
def test_a_partition_starts_once_its_increment_has_passed(
    now: str, runnable_partitions: list[str]
) -> None:
    cfg = config(seed_job("job1"))
    found = runnable(cfg, fresh(cfg), P(now))
    assert [format_partition(run.partition) for run in found] == runnable_partitions
    assert view(cfg, fresh(cfg), "job1", P("2000-01-01 02:00:00"), P(now)).status is (
        Status.WAITING_TIME
    )


def test_a_failed_partition_retries_after_the_delay_its_run_started_with() -> None:
    cfg = config(seed_job("job1", end_partition="2000-01-01 01:00:00", retry_delay="15 minutes"))
    states = fresh(cfg)
    p0, now = P("2000-01-01 00:00:00"), P("2000-01-01 01:00:00")
    states["job1"] = start(states["job1"], cfg.jobs[0], p0, now)
    # The file changes to mark_success while the run is in progress: the run keeps "retry".
    marked = config(
        seed_job("job1", end_partition="2000-01-01 01:00:00", on_failure="mark_success")
    )
    states["job1"], outcome = finish(states["job1"], p0, False, now + 1000, "exit code 1")
    assert outcome is Outcome.RETRY
    retry_at = now + 1000 + 15 * 60_000
    seen = view(marked, states, "job1", p0, retry_at - 1)
    assert (seen.status, seen.retry_at, seen.reason, seen.attempts) == (
        Status.FAILED, retry_at, "exit code 1", 1,
    )  # fmt: skip
    assert runnable(cfg, states, retry_at - 1) == []
    assert [run.partition for run in runnable(cfg, states, retry_at)] == [p0]


def test_retries_back_off_and_stop_at_the_attempt_limit() -> None:
    cfg = config(
        seed_job(
            "job1",
            end_partition="2000-01-01 01:00:00",
            retry_delay="10 minutes",
            retry_backoff=2,
            max_attempts=3,
        )
    )
    states, p0 = fresh(cfg), P("2000-01-01 00:00:00")
    now, waits = P("2000-01-01 01:00:00"), []
    for _ in range(3):
        assert [run.partition for run in runnable(cfg, states, now)] == [p0]
        states["job1"] = start(states["job1"], cfg.jobs[0], p0, now)
        states["job1"], outcome = finish(states["job1"], p0, False, now)
        retry_at = states["job1"].failed[p0].retry_at
        if retry_at is not None:
            waits.append((retry_at - now) // 60_000)
            now = retry_at
    assert waits == [10, 20]
    assert outcome is Outcome.GAVE_UP
    assert runnable(cfg, states, LATER) == []
    assert view(cfg, states, "job1", p0, LATER).status is Status.FAILED


def test_a_dependant_of_a_partition_that_failed_for_good_is_blocked_forever() -> None:
    cfg = config(
        seed_job("up", max_attempts=1),
        seed_job("down", dependencies=[{"name": "up", "shift": "0 hours"}]),
    )
    states = fresh(cfg)
    drive(cfg, states, LATER, succeeds=lambda job, p: p != P("2000-01-01 03:00:00"))
    seen = view(cfg, states, "down", P("2000-01-01 03:00:00"), LATER)
    assert seen.status is Status.BLOCKED_FOREVER
    assert seen.reason == "up 2000-01-01 03:00:00 failed for good (the run failed); rerun it"
    assert summary(cfg, states, "down", LATER).succeeded == 23


def test_a_wait_on_a_partition_blocked_forever_is_blocked_forever_too() -> None:
    cfg = config(
        seed_job(
            "a",
            dependencies=[{"name": "a", "shift": "-1 hours"}],
            start_partition="2000-01-01 01:00:00",
        ),
        seed_job("b", dependencies=[{"name": "c", "shift": "0 hours"}]),
        seed_job("c", dependencies=[{"name": "a", "shift": "-2 hours"}]),
    )
    states = fresh(cfg)
    drive(cfg, states, LATER)
    seen = view(cfg, states, "b", P("2000-01-01 02:00:00"), LATER)
    assert seen.status is Status.BLOCKED_FOREVER
    assert "c 2000-01-01 02:00:00 is blocked forever" in (seen.reason or "")


def test_a_partition_names_the_dependency_partitions_it_waits_for() -> None:
    cfg = config(
        seed_job("up"),
        seed_job(
            "down",
            dependencies=[{"name": "up", "shift": "0 hours"}, {"name": "up", "shift": "-1 hours"}],
        ),
    )
    seen = view(cfg, fresh(cfg), "down", P("2000-01-01 05:00:00"), LATER)
    assert seen.status is Status.WAITING_DEPENDENCIES
    assert seen.waiting_for == ("up 2000-01-01 05:00:00", "up 2000-01-01 04:00:00")


def test_a_daily_job_waits_for_all_24_hourly_partitions_of_its_day_in_one_entry() -> None:
    cfg = config(
        seed_job("hourly", end_partition="2000-01-03 00:00:00"),
        seed_job(
            "daily",
            increment="1 days",
            end_partition="2000-01-03 00:00:00",
            dependencies=[{"name": "hourly", "from": "0 hours", "to": "1 days"}],
        ),
    )
    states = fresh(cfg)
    drive(cfg, states, LATER, succeeds=lambda job, p: p != P("2000-01-02 23:00:00"))
    assert view(cfg, states, "daily", P("2000-01-01 00:00:00"), LATER).status is Status.SUCCEEDED
    second = view(cfg, states, "daily", P("2000-01-02 00:00:00"), LATER)
    assert second.status is Status.WAITING_DEPENDENCIES
    assert second.waiting_for == ("hourly 2000-01-02 23:00:00",)


def test_a_self_dependency_on_the_previous_partition_blocks_the_first_and_all_after() -> None:
    cfg = config(seed_job("job1", dependencies=[{"name": "job1", "shift": "-1 hours"}]))
    states = fresh(cfg)
    assert runnable(cfg, states, LATER) == []
    first = view(cfg, states, "job1", P("2000-01-01 00:00:00"), LATER)
    assert first.status is Status.BLOCKED_FOREVER
    second = view(cfg, states, "job1", P("2000-01-01 01:00:00"), LATER)
    assert second.status is Status.BLOCKED_FOREVER
    assert second.reason == (
        "job1 2000-01-01 00:00:00 is blocked forever "
        "(job1 1999-12-31 23:00:00 is before job1's first partition)"
    )


def test_a_self_dependency_runs_partitions_one_after_the_other() -> None:
    plain = config(seed_job("job1"))
    states = fresh(plain)
    states["job1"] = start(states["job1"], plain.jobs[0], P("2000-01-01 00:00:00"), 0)
    states["job1"], _ = finish(states["job1"], P("2000-01-01 00:00:00"), True, 0)
    chained = config(seed_job("job1", dependencies=[{"name": "job1", "shift": "-1 hours"}]))
    order = []
    for _ in range(23):
        (run,) = runnable(chained, states, LATER)
        order.append(format_partition(run.partition)[11:13])
        states["job1"] = start(states["job1"], chained.jobs[0], run.partition, LATER)
        states["job1"], _ = finish(states["job1"], run.partition, True, LATER)
    assert order == [f"{hour:02d}" for hour in range(1, 24)]
    assert runnable(chained, states, LATER) == []


def test_partitions_older_than_catch_up_are_skipped() -> None:
    cfg = config(seed_job("job1", catch_up="3 hours"))
    now = P("2000-01-01 12:00:00")
    found = [format_partition(run.partition) for run in runnable(cfg, fresh(cfg), now)]
    assert found == ["2000-01-01 09:00:00", "2000-01-01 10:00:00", "2000-01-01 11:00:00"]
    assert view(cfg, fresh(cfg), "job1", P("2000-01-01 08:00:00"), now).status is Status.SKIPPED


def test_views_list_partitions_with_their_status_oldest_first() -> None:
    cfg = config(seed_job("job1", max_parallelism=1))
    states = fresh(cfg)
    start_all(cfg, states, P("2000-01-01 03:00:00"))
    statuses = [v.status for v in views(cfg, states, "job1", P("2000-01-01 03:00:00"), limit=5)]
    assert statuses == [
        Status.RUNNING,
        Status.RUNNABLE,
        Status.RUNNABLE,
        Status.WAITING_TIME,
        Status.WAITING_TIME,
    ]


def test_a_decision_does_not_walk_partitions_its_upstream_has_not_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scheduler.batch import decide

    cfg = config(
        seed_job("up", increment="1 minutes", end_partition="2010-01-01 00:00:00"),
        seed_job(
            "down",
            increment="1 minutes",
            end_partition="2010-01-01 00:00:00",
            dependencies=[{"name": "up", "shift": "0 minutes"}],
        ),
        max_parallelism=4,
    )
    looked_at = []
    real = decide.upstream

    def counting(*args: object) -> object:
        looked_at.append(args[1])
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(decide, "upstream", counting)
    found = runnable(cfg, fresh(cfg), P("2010-01-01 00:00:00"))  # 5.2 M minutes each, all due
    assert [run.job for run in found] == ["up"] * 4
    assert looked_at == [0]  # down stops at its first partition: up has done none


def test_a_decision_stops_where_the_upstream_job_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler.batch import decide

    cfg = config(
        seed_job("up"),
        seed_job(
            "down",
            end_partition="2010-01-01 00:00:00",
            dependencies=[{"name": "up", "shift": "0 hours"}],
        ),
    )
    states = fresh(cfg)
    for run in runnable(config(seed_job("up")), states, LATER):
        states["up"] = start(states["up"], cfg.jobs[0], run.partition, LATER)
        states["up"], _ = finish(states["up"], run.partition, True, LATER)
    looked_at = []
    real = decide.upstream

    def counting(*args: object) -> object:
        looked_at.append(args[1])
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(decide, "upstream", counting)
    found = runnable(cfg, states, P("2010-01-01 00:00:00"))  # 87 648 partitions of down due
    assert len(found) == 24
    assert looked_at == list(range(25))  # the 25th is at up's end: no later one can run


def test_the_view_of_a_long_chain_of_waits_judges_each_partition_once() -> None:
    cfg = config(
        seed_job(
            "job1",
            end_partition="2000-02-01 00:00:00",
            dependencies=[
                {"name": "job1", "shift": "-1 hours"},
                {"name": "job1", "shift": "-2 hours"},
            ],
        )
    )
    states = fresh(cfg)
    seen = views(cfg, states, "job1", LATER, first=700, limit=3)  # 2^32 paths without memo
    assert [v.status for v in seen] == [Status.WAITING_DEPENDENCIES] * 3
    assert seen[0].waiting_for == ("job1 2000-01-30 03:00:00", "job1 2000-01-30 02:00:00")


def test_a_job_whose_start_equals_its_end_never_runs() -> None:
    # The seed's sameEndPartition.
    cfg = config(seed_job("job1", end_partition="2000-01-01 00:00:00"))
    states = fresh(cfg)
    assert runnable(cfg, states, LATER) == []
    counts = summary(cfg, states, "job1", LATER)
    assert (counts.total, counts.pending, counts.oldest_pending) == (0, 0, None)
    with pytest.raises(ValueError, match="is not a partition of job1"):
        view(cfg, states, "job1", P("2000-01-01 00:00:00"), LATER)
