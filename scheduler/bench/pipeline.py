"""pipeline: the example's day of clicks through the scheduler, against the same jobs run plainly.

Both sides run on one warm SparkSession (the worker's shared one, as `scheduler example run`
starts it from the settings' `spark_master` and `spark_conf`), on the same generated input:

* *scheduler*: an `EmbeddedScheduler` with the Spark executor runs the 24 hourly tasks (all due
  by the time they are enqueued), then the daily rollup once they are done, as `scheduler example
  run` does; the time runs from the first enqueue to the rollup's end.
* *plain*: the same 25 job functions called one after another in this thread, no scheduler: the
  sequential floor of the Spark work.

The sides alternate over the repetitions; each writes into an output directory of its own.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from scheduler.bench.common import BenchOptions, ScenarioResult, Stopwatch, alternate

#: Backdating of the plan: every task is due by the time it is enqueued, so the scheduler side
#: waits for no due time (the plan spaces the hourly tasks 200 ms apart, the rollup 1 s later).
BACKDATE = timedelta(seconds=7)

DAY = date(2026, 11, 21)


def through_scheduler(executor: Any, data_dir: Path, out_dir: Path, scratch: Path) -> float:
    """Seconds from enqueuing the 24 hourly tasks to the end of the rollup, embedded engine."""
    from scheduler.embedded import DEFAULT_PARTITIONS, EmbeddedScheduler
    from scheduler.examples.clicks.run import plan_tasks
    from scheduler.model import TaskState
    from scheduler.partitioning import partition_for

    with EmbeddedScheduler(data_dir=scratch, executor=executor) as scheduler:
        with Stopwatch() as watch:
            plan = plan_tasks(DAY, data_dir, out_dir, datetime.now(UTC) - BACKDATE)
            scheduler.client.schedule_tasks(plan[:-1]).result(timeout=60)
            scheduler.wait_until_idle(timeout=1800, include_future=True, settle_s=0.1)
            rollup = plan_tasks(DAY, data_dir, out_dir, datetime.now(UTC) - BACKDATE)[-1]
            scheduler.client.schedule_task(rollup).result(timeout=60)
            scheduler.wait_until_idle(timeout=1800, include_future=True, settle_s=0.1)
        for task in [*plan[:-1], rollup]:
            partition = partition_for(task.ordering_id.encode(), DEFAULT_PARTITIONS)
            status = scheduler.store.fetch_statuses(partition, [task.key]).get(task.key)
            if status is None or status.state is not TaskState.SUCCEEDED:
                raise RuntimeError(
                    f"task {task.key} of the pipeline bench ended "
                    f"{status.state.value if status else 'unknown'}: "
                    f"{status.last_error if status else 'never run'}"
                )
    return watch.seconds


def plain(spark: Any, data_dir: Path, out_dir: Path, *, hours: int = 24) -> float:
    """Seconds to call the 25 job functions one after another on `spark`, no scheduler (with
    fewer `hours`, only those hourly jobs)."""
    from scheduler.examples.clicks.jobs import clean_and_aggregate_hour, rollup_day
    from scheduler.examples.clicks.run import plan_tasks
    from scheduler.executors.abc import ExecutionContext

    with Stopwatch() as watch:
        plan = plan_tasks(DAY, data_dir, out_dir, datetime.now(UTC) - BACKDATE)
        for task in plan[:hours]:
            clean_and_aggregate_hour(spark, ExecutionContext(task, attempt=1, partition=0))
        if hours == 24:
            rollup_day(spark, ExecutionContext(plan[-1], attempt=1, partition=0))
    return watch.seconds


def run(options: BenchOptions) -> ScenarioResult:
    from scheduler.examples.clicks.generate import generate_if_missing
    from scheduler.executors.spark import SparkExecutor, local_cores

    events_per_hour = options.pick(5_000, 50)
    settings = options.settings
    conf = {"spark.ui.enabled": "false", **dict(settings.spark_conf)}
    executor = SparkExecutor(master=settings.spark_master, conf=conf)
    started = time.perf_counter()
    spark = executor.session()
    session_s = time.perf_counter() - started
    spark.sparkContext.setLogLevel("ERROR")
    data_dir = options.scratch / "pipeline-data"
    started = time.perf_counter()
    generate_if_missing(data_dir, DAY, spark=spark, events_per_hour=events_per_hour)
    generate_s = time.perf_counter() - started

    # The JVM compiles Spark's code paths as they first run: one hourly job, untimed, so that the
    # side measured first does not pay for it alone.
    warm_up = options.scratch / "pipeline-warm-up"
    plain(spark, data_dir, warm_up, hours=1)
    counter = iter(range(1_000_000))

    def scheduler_side() -> dict[str, float]:
        n = next(counter)
        out = options.scratch / f"pipeline-out-{n}"
        return {"seconds": through_scheduler(executor, data_dir, out, options.scratch / f"s-{n}")}

    def plain_side() -> dict[str, float]:
        n = next(counter)
        return {"seconds": plain(spark, data_dir, options.scratch / f"pipeline-out-{n}")}

    measured = alternate({"scheduler": scheduler_side, "plain": plain_side}, options.repeat)
    through, floor = measured["scheduler"]["seconds"], measured["plain"]["seconds"]
    result = ScenarioResult(
        "pipeline",
        details={
            "events_per_hour": events_per_hour,
            "master": settings.spark_master,
            "local_cores": local_cores(settings.spark_master),
            "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
            "session_start_s": round(session_s, 2),
            "generate_s": round(generate_s, 2),
            "measured": measured,
        },
    )
    result.add(
        side="24 hourly jobs + rollup through the scheduler (embedded)",
        seconds=through,
        ratio_to_plain=through / floor,
    )
    result.add(
        side="the same jobs one after another, one plain SparkSession",
        seconds=floor,
        ratio_to_plain=1.0,
    )
    result.notes.append(
        f"{events_per_hour:,} events per hour; the session ({session_s:.1f} s) and the input "
        f"({generate_s:.1f} s) are made once and one hourly job warms the JVM up, before either "
        "side is timed"
    )
    result.notes.append(
        "issue 47's targets: the Spark part under 40 s once the session is up; the scheduler "
        "no slower than the plain sequential floor (ratio <= 1)"
    )
    return result
