"""The example pipeline's two PySpark jobs, run by `SparkExecutor` as
`scheduler.examples.clicks.jobs:clean_and_aggregate_hour` and `...:rollup_day`.

Both are idempotent, keyed by their partition, because delivery is at-least-once: each writes its
whole partition into a staging directory named after the attempt, then swaps it into place with
renames, so a rerun replaces the output and a crashed attempt never leaves a half-written partition
where the next job would read it. The Hadoop FileSystem API does the swap, so the same code works
on a local disk, HDFS or any store Hadoop can rename on.

Output layout under `output`::

    hourly/hour=YYYYMMDDHH/clean/    cleaned events (Parquet)
    hourly/hour=YYYYMMDDHH/agg/      events, users, latency per url and country (Parquet)
    hourly/hour=YYYYMMDDHH/stats.json  rows read, kept and dropped by reason
    daily/day=YYYYMMDD/rollup/       the day's aggregate per url and country (Parquet)
    daily/day=YYYYMMDD/top_urls.csv  the day's 20 busiest urls, for a spreadsheet
    daily/day=YYYYMMDD/summary.json  totals and the top urls, for a human
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from scheduler.executors.abc import ExecutionContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["EVENT_SCHEMA", "HourlyOutputsMissingError", "clean_and_aggregate_hour", "rollup_day"]

MAX_LATENCY_MS = 60_000

EVENT_SCHEMA = (
    "event_id STRING, user_id BIGINT, url STRING, country STRING, device STRING, "
    "latency_ms INT, ts TIMESTAMP"
)
"""The columns `generate.py` writes (and the hourly job's cleaned output keeps), given to the
reader so that Spark does not run a job to read them from a file's footer."""


class HourlyOutputsMissingError(RuntimeError):
    """The daily rollup ran before every hour of its day was produced; the engine retries it."""


def clean_and_aggregate_hour(spark: SparkSession, context: ExecutionContext) -> None:
    """Clean one hour of events and aggregate it per url and country.

    args: `hour` (YYYYMMDDHH), `input` (the events directory), `output` (the pipeline's root).
    Run as a program by a schedule, the hour is the one before the run's `_logical_time` (the
    cron fire at five past it), and with a `dataset` argument the hour is published as a landed
    partition of that dataset once its output is in place (`publish_output`).

    Five Spark jobs of one task each on a small hour (docs/example-pipeline.md#how-long-it-takes):
    the schema is given, not inferred from the files (which would be a job of its own); the counts
    of `stats.json` are observed while the cleaned events are written (`DataFrame.observe`), not
    counted by extra actions; and the aggregate reads the cleaned events just written instead of
    caching them.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    args = context.data["args"]
    hour = str(args["hour"]) if "hour" in args else hour_before(str(args["_logical_time"]))
    start = datetime.strptime(hour, "%Y%m%d%H").replace(tzinfo=UTC)
    raw = spark.read.schema(EVENT_SCHEMA).parquet(f"{args['input']}/hour={hour}")

    in_hour = F.col("ts").between(
        F.lit(start), F.lit(start + timedelta(hours=1) - timedelta(0, 0, 1))
    )
    valid_latency = F.col("latency_ms").between(1, MAX_LATENCY_MS)
    complete = (
        F.col("event_id").isNotNull() & F.col("user_id").isNotNull() & F.col("url").isNotNull()
    )
    checks, kept = Observation("checks"), Observation("kept")
    clean = (
        raw.observe(
            checks,
            F.count(F.lit(1)).alias("rows_read"),
            F.sum(F.when(~complete, 1).otherwise(0)).alias("dropped_incomplete"),
            F.sum(F.when(complete & ~valid_latency, 1).otherwise(0)).alias("dropped_bad_latency"),
            F.sum(F.when(complete & valid_latency & ~in_hour, 1).otherwise(0)).alias(
                "dropped_outside_hour"
            ),
        )
        .where(complete & valid_latency & in_hour)
        .dropDuplicates(["event_id"])
        .observe(kept, F.count(F.lit(1)).alias("rows_kept"))
    )
    staging = f"{args['output']}/hourly/_staging/hour={hour}/attempt-{context.attempt}"
    clean.coalesce(1).write.mode("overwrite").parquet(f"{staging}/clean")
    stats: dict[str, Any] = {k: int(v or 0) for k, v in checks.get.items()}
    stats["rows_kept"] = int(kept.get["rows_kept"])
    stats["dropped_duplicates"] = (
        stats["rows_read"]
        - stats["rows_kept"]
        - sum(v for k, v in stats.items() if k.startswith("dropped_"))
    )
    stats.update(hour=hour, task=str(context.key), attempt=context.attempt)
    written = spark.read.schema(EVENT_SCHEMA).parquet(f"{staging}/clean")
    _aggregate(written).coalesce(1).write.mode("overwrite").parquet(f"{staging}/agg")
    _write_text(spark, f"{staging}/stats.json", json.dumps(stats, indent=2) + "\n")
    context.raise_if_cancelled()
    _replace(spark, staging, f"{args['output']}/hourly/hour={hour}")
    if "dataset" in args:
        from scheduler.programs import publish_output

        publish_output(str(args["dataset"]), [hour])


def hour_before(logical_time: str) -> str:
    """The hour (YYYYMMDDHH, UTC) that ended before `logical_time` (ISO 8601): the hour that an
    hourly fire at five past cleans."""
    moment = datetime.fromisoformat(logical_time).astimezone(UTC) - timedelta(hours=1)
    return f"{moment:%Y%m%d%H}"


def rollup_day(spark: SparkSession, context: ExecutionContext) -> None:
    """Roll the day's 24 cleaned hours up per url and country, with a CSV and a JSON summary.

    args: `day` (YYYYMMDD), `output` (the pipeline's root). Raises `HourlyOutputsMissingError`,
    listing the hours, while any hour is missing: the engine retries until they all arrive.
    """
    args = context.data["args"]
    day = str(args["day"])
    root = f"{args['output']}/hourly"
    hours = [f"{day}{h:02d}" for h in range(24)]
    missing = [h for h in hours if not _exists(spark, f"{root}/hour={h}/stats.json")]
    if missing:
        raise HourlyOutputsMissingError(
            f"daily rollup of {day} needs all 24 hourly outputs under {root}; "
            f"{len(missing)} missing: {', '.join(missing)}. It will be retried."
        )
    clean = spark.read.schema(EVENT_SCHEMA).parquet(*[f"{root}/hour={h}/clean" for h in hours])
    staging = f"{args['output']}/daily/_staging/day={day}/attempt-{context.attempt}"
    _aggregate(clean).coalesce(1).write.mode("overwrite").parquet(f"{staging}/rollup")
    # A day has a few hundred url/country rows: read back what was written (instead of caching
    # it) and rank them on the driver.
    rows = spark.read.parquet(f"{staging}/rollup").collect()
    per_url: dict[str, list[int]] = {}
    for row in rows:
        events, p95 = per_url.setdefault(row.url, [0, 0])
        per_url[row.url] = [events + row.events, max(p95, row.p95_latency_ms)]
    top = sorted(per_url.items(), key=lambda item: (-item[1][0], item[0]))[:20]
    hourly = [json.loads(_read_text(spark, f"{root}/hour={h}/stats.json")) for h in hours]
    summary = {
        "day": day,
        "task": str(context.key),
        "events_read": sum(s["rows_read"] for s in hourly),
        "events_kept": sum(s["rows_kept"] for s in hourly),
        "distinct_users": clean.select("user_id").distinct().count(),
        "url_country_rows": len(rows),
        "dropped": {
            reason: sum(s[reason] for s in hourly)
            for reason in sorted(hourly[0])
            if reason.startswith("dropped_")
        },
        "top_urls": [{"url": url, "events": events} for url, (events, _) in top[:10]],
    }
    csv = "url,events,max_p95_latency_ms\n" + "".join(
        f"{url},{events},{p95}\n" for url, (events, p95) in top
    )
    _write_text(spark, f"{staging}/top_urls.csv", csv)
    _write_text(spark, f"{staging}/summary.json", json.dumps(summary, indent=2) + "\n")
    context.raise_if_cancelled()
    _replace(spark, staging, f"{args['output']}/daily/day={day}")


def _aggregate(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return events.groupBy("url", "country").agg(
        F.count(F.lit(1)).alias("events"),
        F.countDistinct("user_id").alias("users"),
        F.round(F.avg("latency_ms"), 1).alias("avg_latency_ms"),
        F.percentile_approx("latency_ms", 0.95).alias("p95_latency_ms"),
    )


def _fs(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """The Hadoop FileSystem holding `path`, and `path` as a Hadoop Path."""
    jvm, jsc = spark.sparkContext._jvm, spark.sparkContext._jsc
    if jvm is None or jsc is None:
        raise RuntimeError("the SparkSession was stopped while the job was running")
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    conf = jsc.hadoopConfiguration()
    return hadoop_path.getFileSystem(conf), hadoop_path


def _exists(spark: SparkSession, path: str) -> bool:
    fs, hadoop_path = _fs(spark, path)
    return bool(fs.exists(hadoop_path))


def _write_text(spark: SparkSession, path: str, text: str) -> None:
    fs, hadoop_path = _fs(spark, path)
    stream = fs.create(hadoop_path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def _read_text(spark: SparkSession, path: str) -> str:
    fs, hadoop_path = _fs(spark, path)
    stream = fs.open(hadoop_path)
    try:
        reader = spark.sparkContext._jvm.java.io.BufferedReader(  # type: ignore[union-attr]
            spark.sparkContext._jvm.java.io.InputStreamReader(stream, "UTF-8")  # type: ignore[union-attr]
        )
        return "\n".join(iter(reader.readLine, None))
    finally:
        stream.close()


def _replace(spark: SparkSession, staging: str, final: str) -> None:
    """Move `staging` to `final`, replacing it: the partition's commit point."""
    fs, final_path = _fs(spark, final)
    _, staging_path = _fs(spark, staging)
    fs.delete(final_path, True)
    fs.mkdirs(final_path.getParent())
    if not fs.rename(staging_path, final_path):
        raise OSError(f"could not move {staging} to {final}; is the output directory writable?")
    fs.delete(staging_path.getParent(), True)  # the partition's staging area, now empty


def write_report(spark: SparkSession, context: ExecutionContext) -> None:
    """Write the day's report (`report.txt`, what `scheduler example run` prints at the end) next
    to its rollup. args: `day` (YYYYMMDD), `output` (the pipeline's root)."""
    from scheduler.examples.clicks.run import summarize

    args = context.data["args"]
    day = str(args["day"])
    _write_text(
        spark, f"{args['output']}/daily/day={day}/report.txt", summarize(args["output"]) + "\n"
    )
