"""The example's jobs as they were before issue 47's rewrite (inferred schema, extra counting
actions, a cached frame): the reference the rewritten jobs must match output for output.

Only the two job functions are kept; the helpers they call are the package's.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from scheduler.examples.clicks.jobs import (
    MAX_LATENCY_MS,
    HourlyOutputsMissingError,
    _aggregate,
    _exists,
    _read_text,
    _replace,
    _write_text,
)
from scheduler.executors.abc import ExecutionContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def clean_and_aggregate_hour(spark: SparkSession, context: ExecutionContext) -> None:
    """Clean one hour of events and aggregate it per url and country.

    args: `hour` (YYYYMMDDHH), `input` (the events directory), `output` (the pipeline's root).
    """
    from pyspark.sql import functions as F

    args = context.data["args"]
    hour = str(args["hour"])
    start = datetime.strptime(hour, "%Y%m%d%H").replace(tzinfo=UTC)
    raw = spark.read.parquet(f"{args['input']}/hour={hour}")

    in_hour = F.col("ts").between(
        F.lit(start), F.lit(start + timedelta(hours=1) - timedelta(0, 0, 1))
    )
    valid_latency = F.col("latency_ms").between(1, MAX_LATENCY_MS)
    complete = (
        F.col("event_id").isNotNull() & F.col("user_id").isNotNull() & F.col("url").isNotNull()
    )
    checks = raw.agg(
        F.count(F.lit(1)).alias("rows_read"),
        F.sum(F.when(~complete, 1).otherwise(0)).alias("dropped_incomplete"),
        F.sum(F.when(complete & ~valid_latency, 1).otherwise(0)).alias("dropped_bad_latency"),
        F.sum(F.when(complete & valid_latency & ~in_hour, 1).otherwise(0)).alias(
            "dropped_outside_hour"
        ),
    ).first()
    clean = raw.where(complete & valid_latency & in_hour).dropDuplicates(["event_id"])
    clean = clean.cache()
    try:
        aggregate = _aggregate(clean)
        stats: dict[str, Any] = {
            k: int(v or 0) for k, v in (checks.asDict() if checks else {}).items()
        }
        stats["rows_kept"] = clean.count()
        stats["dropped_duplicates"] = (
            stats["rows_read"]
            - stats["rows_kept"]
            - sum(v for k, v in stats.items() if k.startswith("dropped_"))
        )
        stats.update(hour=hour, task=str(context.key), attempt=context.attempt)
        staging = f"{args['output']}/hourly/_staging/hour={hour}/attempt-{context.attempt}"
        clean.coalesce(1).write.mode("overwrite").parquet(f"{staging}/clean")
        aggregate.coalesce(1).write.mode("overwrite").parquet(f"{staging}/agg")
        _write_text(spark, f"{staging}/stats.json", json.dumps(stats, indent=2) + "\n")
        context.raise_if_cancelled()
        _replace(spark, staging, f"{args['output']}/hourly/hour={hour}")
    finally:
        clean.unpersist()


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
    clean = spark.read.parquet(*[f"{root}/hour={h}/clean" for h in hours])
    rollup = _aggregate(clean).cache()
    try:
        # A day has a few hundred url/country rows: rank them on the driver, one Spark job.
        rows = rollup.collect()
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
        staging = f"{args['output']}/daily/_staging/day={day}/attempt-{context.attempt}"
        rollup.coalesce(1).write.mode("overwrite").parquet(f"{staging}/rollup")
        csv = "url,events,max_p95_latency_ms\n" + "".join(
            f"{url},{events},{p95}\n" for url, (events, p95) in top
        )
        _write_text(spark, f"{staging}/top_urls.csv", csv)
        _write_text(spark, f"{staging}/summary.json", json.dumps(summary, indent=2) + "\n")
        context.raise_if_cancelled()
        _replace(spark, staging, f"{args['output']}/daily/day={day}")
    finally:
        rollup.unpersist()
