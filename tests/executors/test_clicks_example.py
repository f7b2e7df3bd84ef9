"""The example pipeline's jobs on a tiny data set: outputs, idempotence, the rollup's dependency."""

from __future__ import annotations

import itertools
import json
import shutil
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from scheduler.examples.clicks.generate import events_for_hour, generate_if_missing
from scheduler.examples.clicks.jobs import HourlyOutputsMissingError, hour_before
from scheduler.examples.clicks.run import (
    backfill,
    describe_schedule,
    example_programs,
    example_schedules,
    plan_tasks,
    summarize,
)
from scheduler.executors.spark import JobRegistry, SparkExecutor
from scheduler.programs.catalog import ProgramCatalog
from scheduler.programs.model import StartedBy, StarterKind
from tests.executors.conftest import SPARK_CONF, context_for

DAY = date(2026, 11, 21)


def test_the_plan_is_24_hourly_tasks_then_the_rollup(tmp_path: Path) -> None:
    now = datetime(2026, 11, 22, 4, tzinfo=UTC)
    tasks = plan_tasks(DAY, tmp_path / "data", tmp_path / "out", now)

    assert [t.ordering_id for t in tasks[:2]] == [
        "clicks-hourly:2026112100",
        "clicks-hourly:2026112101",
    ]
    assert tasks[-1].ordering_id == "clicks-daily:20261121"
    assert len({t.ordering_id for t in tasks}) == 25
    assert tasks[0].scheduled_time > now
    assert all(a.scheduled_time < b.scheduled_time for a, b in itertools.pairwise(tasks))
    assert tasks[5].data["args"]["hour"] == "2026112105"
    assert tasks[-1].data["job"] == "scheduler.examples.clicks.jobs:rollup_day"
    registry = JobRegistry(allowed_prefixes=["scheduler.examples"])
    for task in tasks:
        registry.validate(task)


def test_the_backfill_is_the_hourly_schedules_24_fires_that_clean_the_day() -> None:
    hourly = example_schedules()[0]
    requests = backfill(hourly, DAY, backfill_ms=1234)

    assert [r.system["logical_time"] for r in requests[:2]] == [
        "2026-11-21T01:05:00+00:00",
        "2026-11-21T02:05:00+00:00",
    ]
    assert requests[-1].system["logical_time"] == "2026-11-22T00:05:00+00:00"
    hours = [hour_before(str(r.system["logical_time"])) for r in requests]
    assert hours == [f"20261121{h:02d}" for h in range(24)]
    assert {r.started_by for r in requests} == {StartedBy(StarterKind.SCHEDULE, "clicks-hourly")}
    assert {r.program for r in requests} == {"clicks-clean"}
    assert requests[0].request_key == (
        "schedule:clicks-hourly@2026-11-21T01:05:00+00:00/backfill-1234"
    )
    assert len({r.run_id for r in requests}) == 24
    assert {r.run_id for r in backfill(hourly, DAY, backfill_ms=1235)}.isdisjoint(
        r.run_id for r in requests
    )


def test_the_schedules_chain_the_programs_with_their_triggers_and_constraints(
    tmp_path: Path,
) -> None:
    catalog = ProgramCatalog(example_programs(DAY, tmp_path / "data", tmp_path / "out"))
    lines = [describe_schedule(s) for s in example_schedules()]

    assert lines == [
        "runs clicks-clean on cron '5 * * * *' (UTC)",
        "runs clicks-rollup on 24 partitions of clicks-hourly landed; concurrency 1",
        "runs clicks-report on clicks-rollup COMPLETED; concurrency 1, delay 1 s",
    ]
    assert {s.program for s in example_schedules()} == set(catalog.names())
    assert catalog.get("clicks-clean").properties["dataset"] == "clicks-hourly"
    assert catalog.get("clicks-rollup").properties["day"] == "20261121"


def test_generation_is_reproducible_and_dirty() -> None:
    first = list(events_for_hour(DAY, 5, seed=1, count=2000))
    assert first == list(events_for_hour(DAY, 5, seed=1, count=2000))
    assert first != list(events_for_hour(DAY, 5, seed=2, count=2000))
    assert any(row[1] is None for row in first)  # null user ids
    assert len({row[0] for row in first}) < len(first)  # duplicates


@pytest.mark.spark
def test_hourly_jobs_write_their_partition_idempotently_and_the_rollup_waits_for_all_hours(
    spark_session: Any, tmp_path: Path
) -> None:
    assert generate_if_missing(
        tmp_path / "data", DAY, seed=3, spark=spark_session, events_per_hour=200
    )
    assert not generate_if_missing(tmp_path / "data", DAY, seed=3, spark=spark_session)
    executor = SparkExecutor(master="local[2]", conf=SPARK_CONF)  # default registry: examples
    tasks = plan_tasks(DAY, tmp_path / "data", tmp_path / "out", datetime.now(UTC))
    hour = tmp_path / "out/hourly/hour=2026112100"

    executor(tasks[0], context_for(tasks[0]))
    stats = json.loads((hour / "stats.json").read_text())
    executor(tasks[0], context_for(tasks[0], attempt=2))  # at-least-once: a rerun replaces

    again = json.loads((hour / "stats.json").read_text())
    assert stats["rows_read"] == 200 and again["attempt"] == 2
    assert {k: v for k, v in stats.items() if k != "attempt"} == {
        k: v for k, v in again.items() if k != "attempt"
    }
    assert stats["rows_kept"] < 200
    clean = spark_session.read.parquet(str(hour / "clean"))
    assert clean.count() == stats["rows_kept"] == clean.select("event_id").distinct().count()
    assert clean.where("user_id IS NULL OR latency_ms > 60000").count() == 0
    assert spark_session.read.parquet(str(hour / "agg")).count() > 0

    with pytest.raises(HourlyOutputsMissingError, match=r"23 missing: 2026112101, .*2026112123"):
        executor(tasks[-1], context_for(tasks[-1]))
    assert "hourly: 1 hours cleaned, 200 events read" in summarize(tmp_path / "out")


def spark_work(spark: Any, group: str) -> tuple[int, int]:
    """The Spark jobs and tasks run under job group `group`, from Spark's status tracker."""
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(job) for job in tracker.getJobIdsForGroup(group)]
    stages = [tracker.getStageInfo(stage) for job in jobs if job for stage in job.stageIds]
    # Stages whose shuffle output an earlier job wrote are listed too, but skipped: count the
    # tasks that ran.
    return len(jobs), sum(stage.numCompletedTasks for stage in stages if stage)


def rows_of(spark: Any, path: Path) -> list[Any]:
    return sorted(spark.read.parquet(str(path)).collect())


def without_attempt(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    return {k: v for k, v in document.items() if k not in ("task", "attempt")}


@pytest.mark.spark
def test_the_rewritten_jobs_write_exactly_what_the_old_ones_wrote_in_five_spark_jobs_an_hour(
    spark_session: Any, tmp_path: Path
) -> None:
    from tests.executors import clicks_reference as old

    generate_if_missing(tmp_path / "data", DAY, seed=5, spark=spark_session, events_per_hour=500)
    executor = SparkExecutor(master="local[2]", conf=SPARK_CONF)
    new_plan = plan_tasks(DAY, tmp_path / "data", tmp_path / "new", datetime.now(UTC))
    old_plan = plan_tasks(DAY, tmp_path / "data", tmp_path / "old", datetime.now(UTC))
    for task in new_plan[:-1]:
        executor(task, context_for(task))
    compared = [0, 7, 23]
    for index in compared:
        old.clean_and_aggregate_hour(spark_session, context_for(old_plan[index]))

    dropped: dict[str, int] = {}
    for index in compared:
        hour = old_plan[index].data["args"]["hour"]
        new_dir, old_dir = (
            tmp_path / f"new/hourly/hour={hour}",
            tmp_path / f"old/hourly/hour={hour}",
        )
        stats = without_attempt(new_dir / "stats.json")
        assert stats == without_attempt(old_dir / "stats.json")
        for part in ("clean", "agg"):
            assert rows_of(spark_session, new_dir / part) == rows_of(spark_session, old_dir / part)
        for reason, count in stats.items():
            if reason.startswith("dropped_"):
                dropped[reason] = dropped.get(reason, 0) + count
    # The hours compared have dirty rows of every kind, so every count was put to the test.
    assert len(dropped) == 4 and all(dropped.values()), dropped

    shutil.rmtree(tmp_path / "old/hourly")
    shutil.copytree(tmp_path / "new/hourly", tmp_path / "old/hourly")
    executor(new_plan[-1], context_for(new_plan[-1]))
    old.rollup_day(spark_session, context_for(old_plan[-1]))
    new_day, old_day = tmp_path / "new/daily/day=20261121", tmp_path / "old/daily/day=20261121"
    assert without_attempt(new_day / "summary.json") == without_attempt(old_day / "summary.json")
    assert (new_day / "top_urls.csv").read_text() == (old_day / "top_urls.csv").read_text()
    assert rows_of(spark_session, new_day / "rollup") == rows_of(spark_session, old_day / "rollup")

    # The old hourly job ran 10 jobs of 10 tasks here, 11 of 608 with 200 shuffle partitions.
    assert spark_work(spark_session, str(new_plan[1].key)) == (5, 5)


@pytest.mark.spark
@pytest.mark.slow
def test_the_example_runs_as_three_schedules_and_says_what_fired_and_why(
    spark_session: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler.examples.clicks.run import main
    from scheduler.settings import Settings

    settings = Settings(
        executor="spark",
        spark_master="local[2]",
        spark_conf=SPARK_CONF,
        data_dir=tmp_path / "data",
        partitions=4,
    )
    main(settings, events_per_hour=100, timeout_s=600)

    out = capsys.readouterr().out
    assert_fired_as_scheduled(out)
    [day_dir] = (tmp_path / "data/example/clicks/out/daily").glob("day=*")
    summary = json.loads((day_dir / "summary.json").read_text("utf-8"))
    assert 0 < summary["events_kept"] <= summary["events_read"] == 24 * 100
    report = (day_dir / "report.txt").read_text("utf-8")
    assert report.strip() and report.strip() in out  # the report program wrote the summary
    # Its tasks, runs and schedules are in a data directory of its own: the deployment's holds
    # no enabled schedule of the example (an `EmbeddedScheduler` there would wait on its fires).
    own = tmp_path / "data/example"
    assert (own / "store.db").exists() and (own / "log.db").exists()
    assert not (tmp_path / "data/store.db").exists() and not (tmp_path / "data/log.db").exists()
    assert f"SCHEDULER_DATA_DIR={own} scheduler runs list" in out


def assert_fired_as_scheduled(out: str, events_read: int = 24 * 100) -> None:
    """The example's output: its three schedules, the backfill of the day's 24 fires, the
    rollup fired by the partition trigger and the report by the rollup's completion, in order,
    and the summary at the end (`events_read` in the day)."""
    import re

    assert "schedule clicks-hourly: runs clicks-clean on cron '5 * * * *' (UTC)" in out
    assert re.search(r"clicks-hourly: backfilled \d{4}-\d\d-\d\d, 24 fires \(", out)
    assert "clicks-clean: 24 COMPLETED" in out
    rollup = re.search(
        r"clicks-daily fired \(24 partitions of clicks-hourly landed\), logical time \S+: "
        r"run (\w{8}) of clicks-rollup",
        out,
    )
    assert rollup, out
    report = re.search(
        rf"clicks-report fired \(run {rollup[1]} of clicks-rollup COMPLETED\), logical time "
        r"\S+: run \w{8} of clicks-report",
        out,
    )
    assert report, out
    # The 24th hour is published as landed from inside its run, so the rollup can fire before
    # the watcher reads that run COMPLETED: only the rollup before the report is an order.
    assert rollup.start() < report.start()
    assert out.index("clicks-clean: 24 COMPLETED") < report.start()
    assert report.start() < out.index("Output in ")
    assert f"  hourly: 24 hours cleaned, {events_read:,} events read" in out
