"""One local SparkSession for the whole test session: a JVM start costs seconds, a job does not."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from scheduler.executors.abc import ExecutionContext
from scheduler.model import Task

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from scheduler.executors.spark import SparkExecutor

# The product's defaults otherwise (shuffle partitions and all): the tests run jobs as users do.
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.memory": "512m",
    # A short-lived test JVM gains nothing from the optimising JIT; it only delays the start.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def _session_pools() -> Mapping[str, Any]:
    from scheduler.executors.spark import Pool

    return {"default": Pool(), "reports": Pool(weight=3, min_share=1, mode="FIFO")}


SESSION_POOLS = _session_pools()
"""The session's FAIR pools: a second one with its own settings, to see Spark took them."""


def make_task(
    data: Mapping[str, Any], ordering_id: str = "tests", uniqueness_key: str = "u"
) -> Task:
    """A task due now (to the millisecond, plus a counter so keys differ between calls)."""
    make_task.counter += 1  # type: ignore[attr-defined]
    due = datetime.now(UTC) + timedelta(milliseconds=make_task.counter)  # type: ignore[attr-defined]
    return Task(ordering_id, due, uniqueness_key, data)


make_task.counter = 0  # type: ignore[attr-defined]


def context_for(task: Task, attempt: int = 1) -> ExecutionContext:
    return ExecutionContext(task, attempt=attempt, partition=0)


@pytest.fixture(scope="session")
def spark_session() -> Iterator[SparkSession]:
    from scheduler.executors.spark import shared_session, stop_shared_session

    session = shared_session(
        master="local[2]", app_name="scheduler-tests", conf=SPARK_CONF, pools=SESSION_POOLS
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    stop_shared_session()


@pytest.fixture
def spark_executor(spark_session: SparkSession) -> SparkExecutor:
    """An executor on the shared session with an empty job registry of its own."""
    from scheduler.executors.spark import JobRegistry, SparkExecutor

    return SparkExecutor(master="local[2]", conf=SPARK_CONF, jobs=JobRegistry())
