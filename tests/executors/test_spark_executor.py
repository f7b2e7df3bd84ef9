"""SparkExecutor on a real local Spark (local[2]): jobs, failures, cancellation, concurrency."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from scheduler.embedded import DEFAULT_PARTITIONS, EmbeddedScheduler
from scheduler.engine.settings import EngineSettings, RetryPolicy
from scheduler.errors import TaskCancelledError, TaskDataError, UnknownExecutorError
from scheduler.executors.abc import ExecutionContext
from scheduler.executors.spark import SparkExecutor
from scheduler.model import TaskState
from scheduler.partitioning import partition_for
from tests.executors.conftest import context_for, make_task

pytestmark = pytest.mark.spark


def wait_for_running_job(spark: Any, group: str, timeout: float = 60.0) -> None:
    """Block until Spark runs a job of `group` (Spark offers no event for it, so poll)."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if set(tracker.getJobIdsForGroup(group)) & set(tracker.getActiveJobsIds()):
            return
        time.sleep(0.05)
    raise AssertionError(f"no job of group {group} started within {timeout} s")


def sleepy_job(spark: Any, context: ExecutionContext) -> None:
    seconds = context.data["args"]["seconds"]

    def nap(x: int) -> int:
        time.sleep(seconds)
        return x

    spark.sparkContext.parallelize(range(2), 2).map(nap).collect()


def test_a_registered_job_runs_in_its_task_job_group_and_pool(
    spark_executor: SparkExecutor, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def write_numbers(spark: Any, context: ExecutionContext) -> None:
        sc = spark.sparkContext
        seen["group"] = sc.getLocalProperty("spark.jobGroup.id")
        seen["pool"] = sc.getLocalProperty("spark.scheduler.pool")
        seen["logical_time"] = context.logical_time
        spark.range(context.data["args"]["n"]).write.mode("overwrite").parquet(
            context.data["args"]["output"]
        )

    spark_executor.jobs.register("tests:write_numbers", write_numbers)
    task = make_task({"job": "tests:write_numbers", "args": {"n": 42, "output": str(tmp_path)}})

    spark_executor(task, context_for(task))

    spark = spark_executor.session()
    assert spark.read.parquet(str(tmp_path)).count() == 42
    assert seen == {"group": str(task.key), "pool": "default", "logical_time": task.scheduled_time}
    # The pool thread is reused by the next task: nothing of this one may stick to it.
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
    assert spark.sparkContext.getLocalProperty("spark.scheduler.pool") is None


def test_a_failing_job_raises_its_own_error(spark_executor: SparkExecutor) -> None:
    def refuse(spark: Any, context: ExecutionContext) -> None:
        raise ValueError("input partition is empty")

    def divide_by_zero(spark: Any, context: ExecutionContext) -> None:
        spark.sparkContext.parallelize([1], 1).map(lambda x: x // 0).collect()

    spark_executor.jobs.register("tests:refuse", refuse)
    spark_executor.jobs.register("tests:divide_by_zero", divide_by_zero)

    task = make_task({"job": "tests:refuse"})
    with pytest.raises(ValueError, match="input partition is empty"):
        spark_executor(task, context_for(task))
    task = make_task({"job": "tests:divide_by_zero"})
    with pytest.raises(Exception, match="ZeroDivisionError"):
        spark_executor(task, context_for(task))


def test_cancel_with_reason_timeout_stops_a_running_spark_job_quickly(
    spark_executor: SparkExecutor,
) -> None:
    spark_executor.jobs.register("tests:sleepy", sleepy_job)
    task = make_task({"job": "tests:sleepy", "args": {"seconds": 120}})
    context = context_for(task)
    spark = spark_executor.session()
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(spark_executor, task, context)
        wait_for_running_job(spark, str(task.key))
        started = time.monotonic()
        context.cancel("timeout")
        with pytest.raises(TaskCancelledError, match="timeout"):
            future.result(timeout=30)
        assert time.monotonic() - started < 10
    tracker = spark.sparkContext.statusTracker()
    assert not set(tracker.getJobIdsForGroup(str(task.key))) & set(tracker.getActiveJobsIds())


def test_a_job_that_ignores_cancellation_has_its_next_spark_job_cancelled_too(
    spark_executor: SparkExecutor,
) -> None:
    second_job_submitted = threading.Event()

    def stubborn(spark: Any, context: ExecutionContext) -> None:
        try:
            sleepy_job(spark, context)
        except Exception:
            second_job_submitted.set()
            sleepy_job(spark, context)  # ignores context.cancelled: the executor must stop it

    spark_executor.jobs.register("tests:stubborn", stubborn)
    task = make_task({"job": "tests:stubborn", "args": {"seconds": 120}})
    context = context_for(task)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(spark_executor, task, context)
        wait_for_running_job(spark_executor.session(), str(task.key))
        context.cancel("partition revoked")
        with pytest.raises(TaskCancelledError, match="partition revoked"):
            future.result(timeout=30)
    assert second_job_submitted.is_set()


def test_two_pool_threads_run_at_most_two_spark_jobs_at_once_each_in_its_own_group(
    spark_executor: SparkExecutor,
) -> None:
    intervals: list[tuple[float, float]] = []
    groups: dict[str, list[int]] = {}
    lock = threading.Lock()

    def stamp_then_sleep(_: int) -> float:
        started = time.time()
        time.sleep(1.0)
        return started

    def timed(spark: Any, context: ExecutionContext) -> None:
        rdd = spark.sparkContext.parallelize([0], 1)
        # The first row's timestamp, taken on the Spark worker, is when the job really started.
        started = rdd.map(stamp_then_sleep).collect()[0]
        with lock:
            intervals.append((started, time.time()))

    spark_executor.jobs.register("tests:timed", timed)
    tasks = [make_task({"job": "tests:timed"}, ordering_id=f"o{n}") for n in range(6)]
    tracker = spark_executor.session().sparkContext.statusTracker()
    most_active = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures: list[Future[None]] = [
            pool.submit(spark_executor, t, context_for(t)) for t in tasks
        ]
        while not all(f.done() for f in futures):
            most_active = max(most_active, len(tracker.getActiveJobsIds()))
            time.sleep(0.02)
        for future in futures:
            future.result()
    for task in tasks:
        groups[str(task.key)] = list(tracker.getJobIdsForGroup(str(task.key)))

    overlap = max(sum(1 for s, e in intervals if s <= t < e) for t, _ in intervals)
    assert overlap == 2, intervals  # two at once: FAIR pool, two threads, no serialisation
    assert most_active <= 2
    # Pinned threads: every task's job was attributed to that task's group, none to another.
    assert all(len(ids) == 1 for ids in groups.values()), groups
    assert len({ids[0] for ids in groups.values()}) == len(tasks)


def test_an_unknown_job_is_refused_by_validate_and_by_the_call(
    spark_executor: SparkExecutor,
) -> None:
    spark_executor.jobs.register("tests:known", sleepy_job)
    task = make_task({"job": "tests:nope"})

    with pytest.raises(UnknownExecutorError, match=r"'tests:nope'.*registered jobs: tests:known"):
        spark_executor.validate(task)
    with pytest.raises(UnknownExecutorError, match="tests:nope"):
        spark_executor(task, context_for(task))


def test_a_task_without_a_job_or_with_an_unknown_pool_is_refused(
    spark_executor: SparkExecutor,
) -> None:
    spark_executor.jobs.register("tests:known", sleepy_job)
    with pytest.raises(TaskDataError, match="no job name"):
        spark_executor.validate(make_task({"args": {}}))
    with pytest.raises(TaskDataError, match="pool 'vip'"):
        spark_executor.validate(make_task({"job": "tests:known", "pool": "vip"}))


def test_a_task_cancelled_before_it_starts_never_reaches_spark(
    spark_executor: SparkExecutor,
) -> None:
    called = threading.Event()
    spark_executor.jobs.register("tests:flag", lambda spark, context: called.set())
    task = make_task({"job": "tests:flag"})
    context = context_for(task)
    context.cancel("admin")

    with pytest.raises(TaskCancelledError, match="admin"):
        spark_executor(task, context)
    assert not called.is_set()


def test_the_session_has_the_configured_pools_and_leaves_no_allocation_file(
    spark_executor: SparkExecutor,
) -> None:
    sc = spark_executor.session().sparkContext
    reports = sc._jsc.sc().getPoolForName("reports")  # type: ignore[attr-defined]
    assert reports.isDefined(), "the pool from the allocation file is missing"
    pool = reports.get()
    assert (pool.weight(), pool.minShare(), str(pool.schedulingMode())) == (3, 1, "FIFO")
    # Spark read the file while the context started; the scheduler then removed it.
    allocation_file = Path(sc.getConf().get("spark.scheduler.allocation.file"))
    assert allocation_file.name == "fairscheduler.xml"
    assert not allocation_file.parent.exists()


def test_an_operator_cancel_of_a_running_task_cancels_its_spark_job_group(
    spark_executor: SparkExecutor, tmp_path: Path
) -> None:
    from scheduler.model import TaskState
    from scheduler.partitioning import partition_for
    from scheduler.testing import embedded_engine

    spark_executor.jobs.register("tests:sleepy", sleepy_job)
    task = make_task({"job": "tests:sleepy", "args": {"seconds": 120}}, ordering_id="cancelled")
    spark = spark_executor.session()
    with embedded_engine(spark_executor, data_dir=tmp_path / "data") as engine:
        engine.client.schedule_task(task).result(timeout=10)
        wait_for_running_job(spark, str(task.key))
        started = time.monotonic()
        engine.client.cancel_task(task.key).result(timeout=10)
        engine.join(timeout=60, raise_failures=False)
        took = time.monotonic() - started
        partition = partition_for(task.ordering_id.encode(), 4)
        status = engine.store.fetch_statuses(partition, [task.key])[task.key]
    assert took < 30  # not the job's 120 s
    tracker = spark.sparkContext.statusTracker()
    assert not set(tracker.getJobIdsForGroup(str(task.key))) & set(tracker.getActiveJobsIds())
    assert status.state is TaskState.CANCELLED


def reject_latency(spark: Any, context: ExecutionContext) -> None:
    """A job whose Spark task raises in Python, as a bad row in real data makes it raise."""

    def check(latency: int) -> int:
        if latency < 0:
            raise ValueError(f"latency {latency} ms is negative; the input is corrupt")
        return latency

    spark.sparkContext.parallelize([5, -1], 2).map(check).collect()


def test_a_python_exception_in_a_spark_task_leads_the_tasks_last_error(
    spark_executor: SparkExecutor, tmp_path: Path
) -> None:
    spark_executor.jobs.register("tests:reject_latency", reject_latency)
    task = make_task({"job": "tests:reject_latency"})
    once = EngineSettings(retry=RetryPolicy(max_attempts=1))

    with EmbeddedScheduler(data_dir=tmp_path, executor=spark_executor, settings=once) as s:
        s.client.schedule_task(task).result(timeout=30)
        s.wait_until_idle(timeout=120, include_future=True)
        status = s.store.fetch_statuses(
            partition_for(task.ordering_id.encode(), DEFAULT_PARTITIONS), [task.key]
        )[task.key]

    assert status.state is TaskState.FAILED
    first_line = status.last_error.splitlines()[0]
    assert first_line.startswith(
        "scheduler.errors.SparkTaskError: ValueError: latency -1 ms is negative; the input is "
        "corrupt (raised in a Spark task of job tests:reject_latency"
    )
    # Spark's whole report still follows, for the frames.
    assert "Traceback (most recent call last):" in status.last_error
