"""PySpark jobs of the batch end-to-end tests (SCHEDULER_SPARK_JOB_MODULES names this module).

Each writes `<out>/<partition>.txt` (the count of a small Spark range) once its Spark job ran;
the run's arguments carry `out` (the job's `arguments`) and `partition` (added by the batch
layer), as docs/batch-jobs.md says a Spark job receives them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from scheduler.executors.abc import ExecutionContext


def _out(context: ExecutionContext) -> tuple[Path, str]:
    args = context.data["args"]
    out = Path(str(args["out"]))
    out.mkdir(parents=True, exist_ok=True)
    return out, str(args["partition"])


def write_partition(spark: SparkSession, context: ExecutionContext) -> None:
    """Count a range of 3 in Spark and write the count to `<out>/<partition>.txt`."""
    out, partition = _out(context)
    (out / f"{partition}.txt").write_text(str(spark.range(3).count()))


def fail_first(spark: SparkSession, context: ExecutionContext) -> None:
    """The first attempt of each partition fails after a Spark job; later ones write."""
    out, partition = _out(context)
    tried = out / f"{partition}.tried"
    if not tried.exists():
        tried.write_text(str(spark.range(1).count()))
        raise RuntimeError(f"the first attempt of {partition} fails on purpose")
    write_partition(spark, context)


def always_fails(spark: SparkSession, context: ExecutionContext) -> None:
    """Fails every attempt, after a Spark job."""
    _, partition = _out(context)
    spark.range(1).count()
    raise RuntimeError(f"{partition} always fails")
