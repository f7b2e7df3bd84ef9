"""Measures what a Spark task costs before it does any work: shared session vs spark-submit.

    python -m scheduler.executors.measure --runs 20 --submit-runs 3

*Shared session*: the time from calling `SparkExecutor` to the first row of its job being computed
on a Spark worker (the row's `time.time()` is taken inside the job, so no SparkListener is needed),
median over `runs` calls on a warm session. *spark-submit*: the wall time of a `SparkSubmitExecutor`
call whose application starts a session and counts ten rows. The bench command reuses these
functions; the numbers go to docs/spark.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scheduler.executors.abc import ExecutionContext
from scheduler.model import Task

TRIVIAL_APPLICATION = """\
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
assert spark.range(10).count() == 10
spark.stop()
"""


def _task(n: int, data: dict[str, Any]) -> Task:
    return Task("measure", datetime.now(UTC) + timedelta(milliseconds=n), f"run-{n}", data)


def shared_session_overhead(runs: int = 20, *, master: str = "local[2]") -> dict[str, float]:
    """Median and p90 seconds from the executor call to the job's first row, and per call."""
    from scheduler.executors.spark import JobRegistry, SparkExecutor

    first_rows: list[float] = []

    def first_row(spark: Any, context: ExecutionContext) -> None:
        rows = spark.sparkContext.parallelize([0], 1).map(lambda _: time.time()).collect()
        first_rows.append(rows[0])

    executor = SparkExecutor(
        master=master, conf={"spark.ui.enabled": "false"}, jobs=JobRegistry({"first": first_row})
    )
    executor.session()
    for n in range(3):  # warm the JIT and the Python worker; not measured
        task = _task(n, {"job": "first"})
        executor(task, ExecutionContext(task, attempt=1, partition=0))
    first_rows.clear()
    starts: list[float] = []
    calls: list[float] = []
    for n in range(runs):
        task = _task(100 + n, {"job": "first"})
        starts.append(time.time())
        executor(task, ExecutionContext(task, attempt=1, partition=0))
        calls.append(time.time() - starts[-1])
    to_first_row = [row - start for row, start in zip(first_rows, starts, strict=True)]
    return {
        "runs": runs,
        "to_first_row_median_s": statistics.median(to_first_row),
        "to_first_row_p90_s": statistics.quantiles(to_first_row, n=10)[-1],
        "call_median_s": statistics.median(calls),
    }


def spark_submit_wall_time(runs: int = 3, *, master: str = "local[2]") -> dict[str, float]:
    """Median and minimum wall seconds of a spark-submit task running a ten-row count."""
    from scheduler.executors.spark_submit import SparkSubmitExecutor

    with tempfile.TemporaryDirectory(prefix="scheduler-measure-") as directory:
        application = Path(directory) / "trivial.py"
        application.write_text(TRIVIAL_APPLICATION, encoding="utf-8")
        executor = SparkSubmitExecutor(
            master=master, conf={"spark.ui.enabled": "false"}, log_dir=directory
        )
        walls: list[float] = []
        for n in range(runs):
            task = _task(n, {"application": str(application)})
            started = time.time()
            executor(task, ExecutionContext(task, attempt=1, partition=0))
            walls.append(time.time() - started)
    return {"runs": runs, "wall_median_s": statistics.median(walls), "wall_min_s": min(walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--submit-runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    options = parser.parse_args()
    result = {
        "shared_session": shared_session_overhead(options.runs, master=options.master),
        "spark_submit": spark_submit_wall_time(options.submit_runs, master=options.master),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
