"""Plans the example pipeline's tasks and describes its results; `scheduler example run` uses it.

One day of clicks is 25 tasks: 24 hourly cleaning tasks, each in its own ordering queue so they run
in parallel up to the worker's pool size, then one daily rollup in a queue of its own. The rollup is
due after the last hourly task but may still start before some hours finish; it then fails with a
clear message and the engine retries it with backoff, which is how a dependency on data is
expressed with plain tasks (see docs/example-pipeline.md).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.examples.clicks.generate import EVENTS_PER_HOUR, generate_if_missing, hour_ids
from scheduler.model import Task

if TYPE_CHECKING:
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.settings import Settings

__all__ = ["DAILY_JOB", "HOURLY_JOB", "generate_if_missing", "main", "plan_tasks", "summarize"]

HOURLY_JOB = "scheduler.examples.clicks.jobs:clean_and_aggregate_hour"
DAILY_JOB = "scheduler.examples.clicks.jobs:rollup_day"

#: Spacing of the hourly tasks' due times, so that the firing order is visible in the logs.
HOURLY_SPACING = timedelta(milliseconds=200)


def plan_tasks(day: date, data_dir: Path, out_dir: Path, now: datetime) -> list[Task]:
    """The 24 hourly tasks of `day` (due from `now` + 1 s, 200 ms apart), then the rollup.

    `now` must be an aware datetime; keys are stable for a given `now`, and the jobs' outputs are
    keyed by partition, so planning the same day twice recomputes the same files.
    """
    first = now + timedelta(seconds=1)
    events = str(Path(data_dir).absolute() / "events")
    output = str(Path(out_dir).absolute())
    tasks = [
        Task(
            f"clicks-hourly:{hour}",
            first + index * HOURLY_SPACING,
            "clean",
            {
                "executor": "spark",
                "job": HOURLY_JOB,
                "args": {"hour": hour, "input": events, "output": output},
            },
        )
        for index, hour in enumerate(hour_ids(day))
    ]
    tasks.append(
        Task(
            f"clicks-daily:{day:%Y%m%d}",
            first + 24 * HOURLY_SPACING + timedelta(seconds=1),
            "rollup",
            {
                "executor": "spark",
                "job": DAILY_JOB,
                "args": {"day": f"{day:%Y%m%d}", "output": output},
            },
        )
    )
    return tasks


def summarize(out_dir: Path) -> str:
    """A human-readable account of what the pipeline produced under `out_dir`."""
    out_dir = Path(out_dir)
    hourly = sorted((out_dir / "hourly").glob("hour=*/stats.json"))
    lines = [f"Output in {out_dir.absolute()}"]
    if hourly:
        stats = [json.loads(path.read_text(encoding="utf-8")) for path in hourly]
        lines.append(
            f"  hourly: {len(stats)} hours cleaned, {sum(s['rows_read'] for s in stats):,} events "
            f"read, {sum(s['rows_kept'] for s in stats):,} kept "
            f"({out_dir / 'hourly'}/hour=YYYYMMDDHH/{{clean,agg}})"
        )
    else:
        lines.append("  hourly: nothing yet")
    daily = sorted((out_dir / "daily").glob("day=*/summary.json"))
    for path in daily:
        summary = json.loads(path.read_text(encoding="utf-8"))
        dropped = ", ".join(
            f"{count:,} {reason.removeprefix('dropped_').replace('_', ' ')}"
            for reason, count in summary["dropped"].items()
        )
        lines += [
            f"  daily {summary['day']}: {summary['events_kept']:,} of {summary['events_read']:,} "
            f"events kept, {summary['distinct_users']:,} distinct users, "
            f"{summary['url_country_rows']:,} url/country rows",
            f"    dropped: {dropped}",
            "    top urls:",
            *(f"      {row['events']:>8,}  {row['url']}" for row in summary["top_urls"][:5]),
            f"    files: {path.parent / 'rollup'}, {path.parent / 'top_urls.csv'}, {path}",
        ]
    if not daily:
        lines.append("  daily: no rollup yet")
    return "\n".join(lines)


def main(
    settings: Settings, *, events_per_hour: int = EVENTS_PER_HOUR, timeout_s: float = 1800
) -> None:
    """`scheduler example run`: yesterday's clicks, end to end, on the embedded backends.

    Data and output go under `<data_dir>/example/clicks/`. The retry policy is raised to at least
    10 attempts, so that the rollup outlasts slow hourly tasks on a small machine.
    """
    from scheduler import runtime
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.engine.settings import RetryPolicy
    from scheduler.errors import ConfigurationError
    from scheduler.executors.registry import RoutingExecutor
    from scheduler.executors.spark import SparkExecutor

    if settings.log != "embedded" or settings.store != "sqlite":
        raise ConfigurationError(
            "`scheduler example run` runs on the embedded log and SQLite store; for Kafka and "
            "Cassandra, enqueue scheduler.examples.clicks.run.plan_tasks(...) with your client"
        )
    executor = runtime.build_executor(settings)
    spark = executor.routes.get("spark") if isinstance(executor, RoutingExecutor) else executor
    if not isinstance(spark, SparkExecutor):
        raise ConfigurationError(
            "the example runs PySpark jobs: set the executor to auto or spark "
            f"(it is {settings.executor})"
        )
    root = runtime.data_dir(settings) / "example" / "clicks"
    day = (datetime.now(UTC) - timedelta(days=1)).date()
    print(f"Example pipeline: clicks of {day}, data and output in {root}")
    print("Starting Spark and generating input if missing (the first time takes a while)...")
    generate_if_missing(root / "data", day, spark=spark.session(), events_per_hour=events_per_hour)
    engine = settings.engine_settings()
    retry = engine.retry
    if retry.max_attempts < 10:
        retry = RetryPolicy(
            max_attempts=10,
            base_delay_s=retry.base_delay_s,
            max_delay_s=max(retry.max_delay_s, 60.0),
            jitter=retry.jitter,
        )
    engine = dataclasses.replace(engine, retry=retry)
    with EmbeddedScheduler(
        data_dir=runtime.data_dir(settings),
        executor=executor,
        partitions=settings.partitions,
        settings=engine,
        topic=settings.topic,
    ) as scheduler:
        hourly = plan_tasks(day, root / "data", root / "out", datetime.now(UTC))[:-1]
        for task in hourly:
            spark.validate(task)
        scheduler.client.schedule_tasks(hourly).result(timeout=30)
        print(f"Enqueued {len(hourly)} hourly tasks; running them...")
        report_progress(scheduler, hourly, settings.partitions, timeout_s)
        # The rollup depends on every hour. It is enqueued once they are done; should it still
        # start too early (another run is rewriting an hour), it fails with the missing hours and
        # the engine retries it with backoff.
        rollup = plan_tasks(day, root / "data", root / "out", datetime.now(UTC))[-1]
        spark.validate(rollup)
        scheduler.client.schedule_task(rollup).result(timeout=30)
        print("Enqueued the daily rollup; running it...")
        report_progress(scheduler, [rollup], settings.partitions, timeout_s)
    print(summarize(root / "out"))


def report_progress(
    scheduler: EmbeddedScheduler, tasks: list[Task], partitions: int, timeout_s: float
) -> None:
    """Print a line whenever the tasks' states change, until every one is final."""
    from scheduler.model import TaskState
    from scheduler.partitioning import partition_for

    by_partition: dict[int, list[Task]] = {}
    for task in tasks:
        by_partition.setdefault(partition_for(task.ordering_id.encode(), partitions), []).append(
            task
        )
    deadline = time.monotonic() + timeout_s
    last_line = ""
    started = time.monotonic()
    while True:
        states: Counter[str] = Counter()
        notes = []
        for partition, members in by_partition.items():
            statuses = scheduler.store.fetch_statuses(partition, [t.key for t in members])
            for task in members:
                status = statuses.get(task.key)
                states[status.state.value if status else "pending"] += 1
                if status and status.state is TaskState.RETRYING and status.last_error:
                    notes.append(f"{task.ordering_id} retrying: {status.last_error[:90]}")
        final = sum(states[s.value] for s in TaskState if s.is_final)
        line = f"  [{time.monotonic() - started:5.0f}s] {final}/{len(tasks)} done: " + ", ".join(
            f"{count} {state}" for state, count in sorted(states.items())
        )
        if line.split("] ", 1)[1] != last_line.split("] ", 1)[-1]:
            print(line + "".join(f"\n      {note}" for note in notes[:2]), flush=True)
            last_line = line
        if final == len(tasks):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the example did not finish within {timeout_s:.0f}s")
        time.sleep(1.0)
