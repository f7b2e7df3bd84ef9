"""Generates one day of synthetic click events, as hourly Parquet partitions, on this machine.

Layout: `<data_dir>/events/hour=YYYYMMDDHH/part-*.parquet`, one directory per hour, and a marker
`<data_dir>/events/_generated-YYYYMMDD-seed-N` once all 24 are written (`generate_if_missing`
needs a local `data_dir`; the jobs themselves read any Hadoop path).

Every hour is drawn from its own `random.Random(seed, hour)`, so the data set is the same on every
machine and every run whatever Spark's partitioning. It is dirty on purpose, as real click logs
are, so the cleaning job has something to do: null user ids and urls, exact duplicate events
(client retries), out-of-range latencies and events stamped outside their hour (late arrivals).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["EVENT_COLUMNS", "generate", "generate_if_missing", "hour_ids"]

EVENTS_PER_HOUR = 5_000
EVENT_COLUMNS = ("event_id", "user_id", "url", "country", "device", "latency_ms", "ts")

_PAGES = ["/", "/search", "/cart", "/checkout", "/login", "/help", "/account", "/deals"]
_PRODUCTS = [f"/product/{n}" for n in range(1, 41)]
_COUNTRIES = ["US", "DE", "FR", "GB", "IN", "BR", "JP", "NL", "ES", "CA"]
_COUNTRY_WEIGHTS = [30, 12, 9, 9, 14, 8, 6, 4, 4, 4]
_DEVICES = ["mobile", "desktop", "tablet"]
_DEVICE_WEIGHTS = [60, 33, 7]


def hour_ids(day: date) -> list[str]:
    """The 24 hour partition ids of `day`, `YYYYMMDDHH`."""
    return [f"{day:%Y%m%d}{hour:02d}" for hour in range(24)]


def events_for_hour(day: date, hour: int, seed: int, count: int) -> Iterator[tuple[Any, ...]]:
    """The events of one hour, dirty rows included, in a reproducible order."""
    rng = random.Random(f"{seed}:{day.isoformat()}:{hour}")
    start = datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
    urls = _PAGES + _PRODUCTS
    # A few pages and products are much more popular than the rest, as on real sites.
    url_weights = [40, 15, 8, 5, 6, 2, 3, 6] + [max(1, 30 // n) for n in range(1, 41)]
    emitted: list[tuple[Any, ...]] = []
    for n in range(count):
        if emitted and rng.random() < 0.01:
            yield rng.choice(emitted[-50:])  # client retry: an exact duplicate
            continue
        ts = start + timedelta(milliseconds=rng.randrange(3_600_000))
        if rng.random() < 0.003:
            ts -= timedelta(hours=1)  # late arrival from the previous hour
        latency = max(1, int(rng.lognormvariate(4.6, 0.6)))
        if rng.random() < 0.005:
            latency = rng.choice([-1, 0, 999_999])
        row = (
            f"{day:%Y%m%d}{hour:02d}-{n:06d}",
            None if rng.random() < 0.01 else rng.randrange(1, 5_000),
            None if rng.random() < 0.005 else rng.choices(urls, url_weights)[0],
            rng.choices(_COUNTRIES, _COUNTRY_WEIGHTS)[0],
            rng.choices(_DEVICES, _DEVICE_WEIGHTS)[0],
            latency,
            ts,
        )
        emitted.append(row)
        yield row


def generate(
    spark: SparkSession,
    data_dir: Path,
    day: date,
    *,
    seed: int = 7,
    events_per_hour: int = EVENTS_PER_HOUR,
) -> Path:
    """Write the day's 24 hourly partitions (overwriting them); return the events directory."""
    from pyspark.sql.types import (
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    schema = StructType(
        [
            StructField("event_id", StringType()),
            StructField("user_id", LongType()),
            StructField("url", StringType()),
            StructField("country", StringType()),
            StructField("device", StringType()),
            StructField("latency_ms", IntegerType()),
            StructField("ts", TimestampType()),
            StructField("hour", StringType()),
        ]
    )
    hours = hour_ids(day)

    def rows(hour: int) -> Iterator[tuple[Any, ...]]:
        for event in events_for_hour(day, hour, seed, events_per_hour):
            yield (*event, hours[hour])

    target = data_dir / "events"
    # Few slices, several hours each: a Spark task's fixed cost dwarfs a small hour's generation.
    slices = min(24, spark.sparkContext.defaultParallelism)
    rdd = spark.sparkContext.parallelize(range(24), slices).flatMap(rows)
    (
        spark.createDataFrame(rdd, schema)
        .write.mode("overwrite")
        # Replace only this day's hours, not other days generated earlier.
        .option("partitionOverwriteMode", "dynamic")
        .partitionBy("hour")
        .parquet(str(target))
    )
    return target


def generate_if_missing(
    data_dir: Path,
    day: date,
    seed: int = 7,
    *,
    spark: SparkSession | None = None,
    events_per_hour: int = EVENTS_PER_HOUR,
) -> bool:
    """Generate the day unless all 24 hours are already there; True if it generated.

    Without `spark` it uses the worker's shared session (`local[*]`), so that the example's first
    run starts one JVM, not two.
    """
    marker = Path(data_dir) / "events" / f"_generated-{day:%Y%m%d}-seed-{seed}"
    if marker.exists():
        return False
    if spark is None:
        from scheduler.executors.spark import shared_session

        spark = shared_session()
    generate(spark, Path(data_dir), day, seed=seed, events_per_hour=events_per_hour)
    marker.write_text(f"{events_per_hour} events per hour\n", encoding="utf-8")
    return True
