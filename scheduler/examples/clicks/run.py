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
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.errors import PartitionCountMismatchError
from scheduler.examples.clicks.generate import EVENTS_PER_HOUR, generate_if_missing, hour_ids
from scheduler.model import Task

if TYPE_CHECKING:
    from scheduler.client import SchedulerClient
    from scheduler.engine.settings import EngineSettings
    from scheduler.executors.abc import Executor
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore
    from scheduler.worker import Worker

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


EXAMPLE_SUFFIX = "example"
"""On Kafka and Cassandra the example runs in a topic, consumer group and keyspace of its own,
the configured names with this suffix: the store keeps tasks by partition, not by topic, so
sharing a keyspace with a real deployment would mix the two, and workers already running in
the configured group would take the example's tasks with whatever executor they have."""


def main(
    settings: Settings, *, events_per_hour: int = EVENTS_PER_HOUR, timeout_s: float = 1800
) -> None:
    """`scheduler example run`: yesterday's clicks, end to end, on the configured backends.

    Data and output go under `<data_dir>/example/clicks/`. The retry policy is raised to at least
    10 attempts, so that the rollup outlasts slow hourly tasks on a small machine. On Kafka or
    Cassandra, the tasks go to a topic, group and keyspace of the example's own (see
    `example_settings`), created if missing and kept afterwards for a look with the CLI.
    """
    from scheduler import runtime
    from scheduler.engine.settings import RetryPolicy
    from scheduler.errors import ConfigurationError
    from scheduler.executors.registry import RoutingExecutor
    from scheduler.executors.spark import SparkExecutor, require_java, require_pyspark
    from scheduler.settings import env_name

    require_pyspark("the example pipeline (PySpark jobs)", instead="")
    require_java()
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
    embedded = settings.log == "embedded" and settings.store == "sqlite"
    if not embedded:
        settings = example_settings(settings)
        print(f"Backends: {runtime.describe(settings)}, group {settings.group_id!r}")
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
    running = _embedded if embedded else _configured
    # The backends first: one that cannot be reached is said before Spark takes its time.
    with running(settings, executor, engine) as (client, store, worker):
        print("Starting Spark and generating input if missing (the first time takes a while)...")
        generate_if_missing(
            root / "data", day, spark=spark.session(), events_per_hour=events_per_hour
        )
        hourly = plan_tasks(day, root / "data", root / "out", datetime.now(UTC))[:-1]
        client.schedule_tasks(hourly).result(timeout=60)
        print(f"Enqueued {len(hourly)} hourly tasks; running them...")
        report_progress(store, hourly, settings.partitions, timeout_s, worker)
        # The rollup depends on every hour. It is enqueued once they are done; should it still
        # start too early (another run is rewriting an hour), it fails with the missing hours and
        # the engine retries it with backoff.
        rollup = plan_tasks(day, root / "data", root / "out", datetime.now(UTC))[-1]
        client.schedule_task(rollup).result(timeout=60)
        print("Enqueued the daily rollup; running it...")
        report_progress(store, [rollup], settings.partitions, timeout_s, worker)
    print(summarize(root / "out"))
    if not embedded:
        names = {
            "topic": settings.topic,
            "group_id": settings.group_id,
            "cassandra_keyspace": settings.cassandra_keyspace,
        }
        where = " ".join(f"{env_name(name)}={value}" for name, value in names.items())
        print(
            "The example's tasks stay in its own topic, group and keyspace; to look at them:\n"
            f"  {where} scheduler tasks list"
        )


def example_settings(settings: Settings) -> Settings:
    """`settings` with the example's own topic, group and keyspace (`EXAMPLE_SUFFIX`)."""
    # A keyspace name has at most 48 characters; cut the configured one, never the suffix, so
    # the result can never be the configured keyspace itself.
    keyspace = f"{settings.cassandra_keyspace[: 47 - len(EXAMPLE_SUFFIX)]}_{EXAMPLE_SUFFIX}"
    return settings.model_copy(
        update={
            "topic": f"{settings.topic}-{EXAMPLE_SUFFIX}",
            "group_id": f"{settings.group_id}-{EXAMPLE_SUFFIX}",
            "cassandra_keyspace": keyspace,
        }
    )


Backends = Iterator[tuple["SchedulerClient", "TaskStore", "Worker"]]


@contextmanager
def _embedded(settings: Settings, executor: Executor, engine: EngineSettings) -> Backends:
    """The embedded scheduler of `settings`' data directory, started."""
    from scheduler import runtime
    from scheduler.embedded import EmbeddedScheduler

    with EmbeddedScheduler(
        data_dir=runtime.data_dir(settings),
        executor=executor,
        partitions=settings.partitions,
        settings=engine,
        topic=settings.topic,
    ) as scheduler:
        yield scheduler.client, scheduler.store, scheduler.worker


@contextmanager
def _configured(settings: Settings, executor: Executor, engine: EngineSettings) -> Backends:
    """The log and store `settings` name (topic and schema created if missing), a client, and
    one worker of `settings.group_id` in this process, assigned its partitions."""
    from scheduler import runtime
    from scheduler.client import SchedulerClient
    from scheduler.worker import Worker

    with ExitStack() as stack:  # closes in reverse: client, worker, store, log
        log = runtime.build_log(settings)
        stack.callback(log.close)
        store = runtime.open_store(settings, create_schema=True)
        stack.callback(store.close)
        try:
            runtime.partition_count_check(log, store, settings.partitions)
        except PartitionCountMismatchError as error:
            raise _example_mismatch(error, settings) from None
        worker = Worker(
            log=log,
            store=store,
            executor=executor,
            settings=engine,
            group_id=settings.group_id,
            client_id=settings.client_id,
        )
        worker.start()
        stack.callback(worker.stop)
        client = SchedulerClient(
            log=log,
            grace_window_s=settings.grace_window_s,
            max_data_bytes=settings.max_data_bytes,
            # As the embedded scheduler does: an unknown job is refused at enqueue.
            validate=getattr(executor, "validate", None),
        )
        stack.callback(client.close)
        if not worker.wait_until_assigned(START_TIMEOUT_S):
            raise TimeoutError(
                f"the example's worker was not assigned partitions of topic {settings.topic!r} "
                f"within {START_TIMEOUT_S:.0f}s"
            )
        yield client, store, worker


def _example_mismatch(
    error: PartitionCountMismatchError, settings: Settings
) -> PartitionCountMismatchError:
    """`error`, saying that the topic and keyspace it names are the example's own, made by an
    earlier run: the user never named them, so its advice to change SCHEDULER_TOPIC reads odd."""
    from scheduler.settings import env_name

    return PartitionCountMismatchError(
        f"{error}. (Topic {settings.topic!r} and keyspace {settings.cassandra_keyspace!r} are the "
        f"example's own, made by an earlier run of it with another partition count: run it "
        f"again with that {env_name('partitions')}, or delete both to start afresh: "
        f"`scheduler services kafka-tool topics --delete --topic {settings.topic}` and "
        f"`DROP KEYSPACE {settings.cassandra_keyspace}` in cqlsh, see docs/cassandra.md.)"
    )


START_TIMEOUT_S = 120.0
"""How long the example's worker may take to join its group (a new group's first join waits for
the broker's initial rebalance delay)."""


def report_progress(
    store: TaskStore,
    tasks: list[Task],
    partitions: int,
    timeout_s: float,
    worker: Worker | None = None,
) -> None:
    """Print a line whenever the tasks' states change, until every one is final; raise the
    error that stopped `worker`, if it stops."""
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
            statuses = store.fetch_statuses(partition, [t.key for t in members])
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
        if worker is not None and worker.fatal_error is not None:
            raise worker.fatal_error
        if time.monotonic() > deadline:
            raise TimeoutError(f"the example did not finish within {timeout_s:.0f}s")
        time.sleep(1.0)
