"""The example pipeline: its programs, schedules and backfill, and the summary of its results.

`scheduler example run` declares three programs on three schedules: the hourly cleaning on a cron
(the day's 24 fires backfilled), the daily rollup on a partition trigger over the 24 hours the
hourly runs publish, and a report on the rollup's completion (see docs/example-pipeline.md).
`plan_tasks` is the same day as 25 plain tasks, for the benchmarks and the jobs' tests.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler.engine.clock import now_ms
from scheduler.errors import PartitionCountMismatchError, SchedulerError
from scheduler.examples.clicks.generate import EVENTS_PER_HOUR, generate_if_missing, hour_ids
from scheduler.model import Task, from_epoch_ms, to_epoch_ms
from scheduler.programs.catalog import ProgramCatalog
from scheduler.programs.launch import LaunchRequest
from scheduler.programs.model import Program, ProgramKind, Run, StartedBy, StarterKind
from scheduler.programs.model import RunStatus as RunState
from scheduler.schedules.model import (
    Concurrency,
    Delay,
    Partition,
    ProgramStatus,
    RunStatus,
    Schedule,
    Time,
)

if TYPE_CHECKING:
    from scheduler.client import SchedulerClient
    from scheduler.engine.settings import EngineSettings
    from scheduler.executors.registry import RoutingExecutor
    from scheduler.programs.abc import RunStore
    from scheduler.schedules.client import SchedulesClient
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore
    from scheduler.worker import Worker

__all__ = [
    "DAILY_JOB",
    "HOURLY_JOB",
    "backfill",
    "example_programs",
    "example_schedules",
    "generate_if_missing",
    "main",
    "plan_tasks",
    "programs_file",
    "summarize",
]

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
    settings: Settings,
    *,
    events_per_hour: int = EVENTS_PER_HOUR,
    timeout_s: float = 1800,
    fleet: bool = False,
) -> None:
    """`scheduler example run`: yesterday's clicks, end to end, on the configured backends, as
    three programs on three schedules (see `example_schedules`).

    Data and output go under `<data_dir>/example/clicks/`. On Kafka or Cassandra, the tasks, runs
    and schedules go to a topic, group and keyspace of the example's own (see `example_settings`),
    created if missing and kept afterwards for a look with the CLI.

    With `fleet`, no worker runs in this process: the workers of the example's group run the
    pipeline (`scheduler worker` with the file `programs_file` writes as their programs, and
    `<data_dir>/example` shared with this process, as docker/example.yml does).
    """
    from scheduler import runtime
    from scheduler.errors import ConfigurationError
    from scheduler.executors.registry import RoutingExecutor
    from scheduler.executors.spark import SparkExecutor, require_java, require_pyspark
    from scheduler.settings import env_name

    require_pyspark("the example pipeline (PySpark jobs)", instead="")
    require_java()
    root = runtime.data_dir(settings) / "example" / "clicks"
    embedded = settings.log == "embedded" and settings.store == "sqlite"
    if embedded:
        # Its own log and store, as on Kafka and Cassandra its own topic and keyspace: its
        # enabled schedules and their next fires stay out of the deployment's data directory.
        settings = settings.model_copy(update={"data_dir": root.parent})
    executor = runtime.build_executor(settings)
    spark = executor.routes.get("spark") if isinstance(executor, RoutingExecutor) else executor
    if not isinstance(spark, SparkExecutor):
        raise ConfigurationError(
            "the example runs PySpark jobs: set the executor to auto or spark "
            f"(it is {settings.executor})"
        )
    if not isinstance(executor, RoutingExecutor):  # programs run through a `workflow` route
        executor = RoutingExecutor({"spark": spark}, default="spark")
    day = example_day()
    print(f"Example pipeline: clicks of {day}, data and output in {root}")
    if embedded and fleet:
        raise ConfigurationError(
            "the example runs on a fleet of workers only on Kafka and Cassandra (set "
            "SCHEDULER_LOG=kafka SCHEDULER_STORE=cassandra); the embedded log's one worker is "
            "this process's, so run it without --fleet"
        )
    if not embedded:
        settings = example_settings(settings)
        print(f"Backends: {runtime.describe(settings)}, group {settings.group_id!r}")
    catalog = ProgramCatalog(example_programs(day, root / "data", root / "out"))
    engine = settings.engine_settings()
    running = _embedded if embedded else _fleet if fleet else _configured
    # The backends first: one that cannot be reached is said before Spark takes its time.
    with running(settings, executor, engine, catalog) as (client, schedules, runs, worker):
        print("Starting Spark and generating input if missing (the first time takes a while)...")
        generate_if_missing(
            root / "data", day, spark=spark.session(), events_per_hour=events_per_hour
        )
        started_ms = now_ms()
        for schedule in example_schedules():
            if schedules.store.get(schedule.name) is not None:
                schedules.delete(schedule.name)  # a fresh job: no count left from an earlier run
            schedules.create(schedule, source=EXAMPLE_SUFFIX)
            schedules.enable(schedule.name)
            print(f"  schedule {schedule.name}: {describe_schedule(schedule)}")
        hourly = backfill(schedules.get(HOURLY_SCHEDULE).schedule, day, started_ms)
        for request in hourly:
            client.schedule_task(request.task()).result(timeout=60)
        print(
            f"{HOURLY_SCHEDULE}: backfilled {day}, {len(hourly)} fires "
            f"({hourly[0].system['logical_time']} ... {hourly[-1].system['logical_time']})"
        )
        watch_runs(runs, started_ms, timeout_s, worker)
    print(summarize(root / "out"))
    if embedded:
        print(
            "The example's tasks, runs and schedules stay in its own data directory; to look at "
            f"them:\n  {env_name('data_dir')}={root.parent} scheduler runs list"
        )
    else:
        names = {
            "topic": settings.topic,
            "group_id": settings.group_id,
            "cassandra_keyspace": settings.cassandra_keyspace,
        }
        where = " ".join(f"{env_name(name)}={value}" for name, value in names.items())
        print(
            "The example's tasks, runs and schedules stay in its own topic, group and keyspace; "
            f"to look at them:\n  {where} scheduler runs list"
        )


def example_day() -> date:
    """The day the example processes: yesterday, in UTC."""
    return (datetime.now(UTC) - timedelta(days=1)).date()


def programs_file(settings: Settings) -> dict[str, Any]:
    """The example's programs for `example_day()` as a programs file (JSON) of workers that run
    the example's tasks with `settings`' data directory: `scheduler example programs FILE`."""
    from scheduler import runtime

    root = runtime.data_dir(settings) / "example" / "clicks"
    programs = example_programs(example_day(), root / "data", root / "out")
    return {
        "programs": {
            program.name: {
                "kind": str(program.kind),
                **program.spec,
                "properties": dict(program.properties),
                "description": program.description,
            }
            for program in programs
        }
    }


HOURLY_SCHEDULE = "clicks-hourly"
DAILY_SCHEDULE = "clicks-daily"
REPORT_SCHEDULE = "clicks-report"
CLEAN_PROGRAM = "clicks-clean"
ROLLUP_PROGRAM = "clicks-rollup"
REPORT_PROGRAM = "clicks-report"
HOURLY_DATASET = "clicks-hourly"
"""The dataset whose partitions (one per hour, YYYYMMDDHH) the hourly runs publish as landed."""
REPORT_DELAY_MS = 1000
"""The report waits this long after the rollup completes (a delay constraint, shown at work)."""
REPORT_JOB = "scheduler.examples.clicks.jobs:write_report"


def example_programs(day: date, data_dir: Path, out_dir: Path) -> list[Program]:
    """The example's three programs: clean an hour, roll the day up, write the day's report.
    Their properties are the example's paths and day; a run adds its logical time."""
    output = str(Path(out_dir).absolute())
    return [
        Program(
            CLEAN_PROGRAM,
            ProgramKind.SPARK,
            {"job": HOURLY_JOB},
            {
                "input": str(Path(data_dir).absolute() / "events"),
                "output": output,
                "dataset": HOURLY_DATASET,
            },
            "cleans the hour before its logical time and publishes it landed",
        ),
        Program(
            ROLLUP_PROGRAM,
            ProgramKind.SPARK,
            {"job": DAILY_JOB},
            {"day": f"{day:%Y%m%d}", "output": output},
            "rolls the day's 24 cleaned hours up",
        ),
        Program(
            REPORT_PROGRAM,
            ProgramKind.SPARK,
            {"job": REPORT_JOB},
            {"day": f"{day:%Y%m%d}", "output": output},
            "writes the day's report next to its rollup",
        ),
    ]


def example_schedules() -> list[Schedule]:
    """Hourly cleaning on a cron, the rollup once 24 hours landed, the report after the rollup."""
    return [
        Schedule(
            name=HOURLY_SCHEDULE,
            description="at five past every hour, clean the hour just ended",
            program=CLEAN_PROGRAM,
            trigger=Time(cron="5 * * * *", time_zone="UTC"),
        ),
        Schedule(
            name=DAILY_SCHEDULE,
            description="roll the day up once its 24 hours have landed",
            program=ROLLUP_PROGRAM,
            trigger=Partition(dataset=HOURLY_DATASET, num_partitions=24),
            constraints=(Concurrency(max_concurrency=1, wait_until_met=True),),
        ),
        Schedule(
            name=REPORT_SCHEDULE,
            description="write the report when a rollup completes, one at a time",
            program=REPORT_PROGRAM,
            trigger=ProgramStatus(program=ROLLUP_PROGRAM, statuses={RunStatus.COMPLETED}),
            constraints=(
                Concurrency(max_concurrency=1, wait_until_met=True),
                Delay(millis=REPORT_DELAY_MS),
            ),
        ),
    ]


def describe_schedule(schedule: Schedule) -> str:
    """One line: program, trigger and constraints, as the example prints them."""
    trigger = schedule.trigger
    if isinstance(trigger, Time):
        what = f"cron {trigger.cron!r} ({trigger.time_zone or schedule.time_zone})"
    elif isinstance(trigger, Partition):
        what = f"{trigger.num_partitions} partitions of {trigger.dataset} landed"
    elif isinstance(trigger, ProgramStatus):
        statuses = "/".join(sorted(str(s) for s in trigger.statuses))
        what = f"{trigger.program} {statuses}"
    else:
        what = str(trigger.type)
    limits = []
    for constraint in schedule.constraints:
        if isinstance(constraint, Concurrency):
            limits.append(f"concurrency {constraint.max_concurrency}")
        elif isinstance(constraint, Delay):
            limits.append(f"delay {constraint.millis / 1000:g} s")
    suffix = f"; {', '.join(limits)}" if limits else ""
    return f"runs {schedule.program} on {what}{suffix}"


def backfill(schedule: Schedule, day: date, backfill_ms: int) -> list[LaunchRequest]:
    """The launch requests of `schedule`'s cron fires that clean the hours of `day`: from 01:05
    to 00:05 the next day, each fire cleaning the hour before it (its logical time).

    Each fire is launched as the schedule would have launched it (started by the schedule, its
    fire as logical time); the request key names this backfill (`backfill_ms`), so that running
    the example again recomputes the day instead of finding its runs done."""
    (cron,) = schedule.crons()
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    after = to_epoch_ms(start + timedelta(hours=1))  # fires after 01:00 clean the day's hours
    until = to_epoch_ms(start + timedelta(days=1, minutes=5))
    requests = []
    now = datetime.now(UTC)
    while (fire := cron.next_after(after)) <= until:
        logical = from_epoch_ms(fire).isoformat()
        requests.append(
            LaunchRequest(
                program=schedule.program,
                request_key=f"schedule:{schedule.name}@{logical}/backfill-{backfill_ms}",
                started_by=StartedBy(StarterKind.SCHEDULE, schedule.name),
                requested_at=now,
                properties=dict(schedule.properties),
                system={"logical_time": logical, "schedule": schedule.name, "backfill": True},
            )
        )
        after = fire
    return requests


def watch_runs(runs: RunStore, since_ms: int, timeout_s: float, worker: Worker | None) -> None:
    """Print each run of the example's programs as it is launched (which schedule, why, its
    logical time) and the hourly runs' progress, until the report's run ends; raise if a run
    fails, or `worker` stops with an error.

    The hourly runs watched are the backfill's (`backfill(..., since_ms)`): once enabled, the
    hourly schedule also fires by itself at five past every hour, and a fire while the example
    runs cleans an hour of today, whose input the example never made. That run fails, and is no
    part of the example's day."""
    deadline = time.monotonic() + timeout_s
    started = time.monotonic()
    seen: set[str] = set()
    last_line = ""
    backfilled = f"/backfill-{since_ms}"
    while True:
        current = [
            run
            for program in (CLEAN_PROGRAM, ROLLUP_PROGRAM, REPORT_PROGRAM)
            for run in runs.list_runs(program=program, limit=1000)
            if run.created_ms >= since_ms
            and (program != CLEAN_PROGRAM or run.request_key.endswith(backfilled))
        ]
        hourly = Counter(str(r.status) for r in current if r.program == CLEAN_PROGRAM)
        line = f"{CLEAN_PROGRAM}: " + ", ".join(f"{n} {s}" for s, n in sorted(hourly.items()))
        if hourly and line != last_line:
            print(f"  [{time.monotonic() - started:5.0f}s] {line}", flush=True)
            last_line = line
        for run in sorted(current, key=lambda r: r.created_ms):
            if run.status is RunState.FAILED:
                raise ExampleRunFailedError(
                    f"run {run.run_id} of {run.program} failed: {run.last_error}; "
                    f"`scheduler runs show {run.run_id}` tells more"
                )
            if run.program != CLEAN_PROGRAM and run.run_id not in seen:
                seen.add(run.run_id)
                print(f"  {why(run)}", flush=True)
        if any(r.program == REPORT_PROGRAM and r.status.is_terminal for r in current):
            return
        if worker is not None and worker.fatal_error is not None:
            raise worker.fatal_error
        if time.monotonic() > deadline:
            raise TimeoutError(f"the example did not finish within {timeout_s:.0f}s")
        time.sleep(0.5)


class ExampleRunFailedError(SchedulerError):
    """A run of the example's programs ended FAILED: the pipeline cannot complete."""


def why(run: Run) -> str:
    """What fired and why, from a run's system arguments (its schedule's trigger info)."""
    args = run.arguments
    because = ""
    if "_triggering.partitions" in args:
        landed = json.loads(str(args["_triggering.partitions"]))
        because = ", ".join(f"{p['count']} partitions of {p['dataset']} landed" for p in landed)
    elif "_triggering.run.id" in args:
        because = (
            f"run {str(args['_triggering.run.id'])[:8]} of {args['_triggering.program']} "
            f"{args['_triggering.run.status']}"
        )
    return (
        f"{args.get('_schedule', run.started_by.name)} fired ({because}), logical time "
        f"{args.get('_logical_time', '?')}: run {run.run_id[:8]} of {run.program}"
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


Backends = Iterator[tuple["SchedulerClient", "SchedulesClient", "RunStore", "Worker | None"]]


@contextmanager
def _embedded(
    settings: Settings, executor: RoutingExecutor, engine: EngineSettings, catalog: ProgramCatalog
) -> Backends:
    """The embedded scheduler of `settings`' data directory with programs and schedules, started
    (the events subscriber too)."""
    from scheduler import runtime
    from scheduler.embedded import EmbeddedScheduler
    from scheduler.programs.runtime import embedded_programs
    from scheduler.schedules.client import SchedulesClient
    from scheduler.schedules.runtime import embedded_schedules

    with ExitStack() as stack:
        scheduler = EmbeddedScheduler(
            data_dir=runtime.data_dir(settings),
            executor=executor,
            partitions=settings.partitions,
            settings=engine,
            topic=settings.topic,
        )
        programs = embedded_programs(scheduler, executor, catalog)
        schedules = embedded_schedules(scheduler, programs, executor.routes)
        stack.callback(schedules.store.close)
        stack.callback(programs.close)
        stack.enter_context(scheduler)
        # The subscriber stops before the engine; the run store and publisher close after it
        # (closed under a task still writing runs, SQLite crashed the process).
        stack.callback(programs.stop_subscriber)
        assert programs.subscriber is not None
        programs.subscriber.start()
        client = SchedulesClient(store=schedules.store, client=scheduler.client, catalog=catalog)
        yield scheduler.client, client, programs.runs, scheduler.worker


@contextmanager
def _fleet(
    settings: Settings, executor: RoutingExecutor, engine: EngineSettings, catalog: ProgramCatalog
) -> Backends:
    """As `_configured`, without a worker: the workers of `settings.group_id`, started
    elsewhere with the example's programs, run the tasks (and read the events)."""
    with _configured(settings, executor, engine, catalog, worker=False) as backends:
        yield backends


@contextmanager
def _configured(
    settings: Settings,
    executor: RoutingExecutor,
    engine: EngineSettings,
    catalog: ProgramCatalog,
    *,
    worker: bool = True,
) -> Backends:
    """The log and store `settings` name (topic and schema created if missing), a client, and
    one worker of `settings.group_id` in this process with programs and schedules, assigned its
    partitions, its events subscriber started (unless not `worker`)."""
    from scheduler import runtime
    from scheduler.client import SchedulerClient
    from scheduler.programs.runtime import worker_programs
    from scheduler.schedules.client import SchedulesClient
    from scheduler.schedules.runtime import worker_schedules
    from scheduler.worker import Worker

    with ExitStack() as stack:  # closes in reverse: client, worker, programs, store, log
        log = runtime.build_log(settings)
        stack.callback(log.close)
        store = runtime.open_store(settings, create_schema=True)
        stack.callback(store.close)
        try:
            runtime.partition_count_check(log, store, settings.partitions)
        except PartitionCountMismatchError as error:
            raise _example_mismatch(error, settings) from None
        programs = worker_programs(
            settings.model_copy(update={"create_schema": True}),
            log=log,
            store=store,
            routes=executor.routes,
        )
        stack.callback(programs.close)
        for program in catalog.programs():
            programs.executor.catalog.register(program)
        executor.routes["workflow"] = programs.executor
        schedule_store = worker_schedules(
            settings.model_copy(update={"create_schema": True}), programs, store, executor.routes
        )
        programs.also_close.append(schedule_store.close)
        running = None
        if worker:
            running = Worker(
                log=log,
                store=store,
                executor=executor,
                settings=engine,
                group_id=settings.group_id,
                client_id=settings.client_id,
            )
            running.start()
            stack.callback(running.stop)
        client = SchedulerClient(
            log=log,
            grace_window_s=settings.grace_window_s,
            max_data_bytes=settings.max_data_bytes,
            # As the embedded scheduler does: an unknown job is refused at enqueue.
            validate=getattr(executor, "validate", None),
        )
        stack.callback(client.close)
        if running is None:
            print(f"The workers of group {settings.group_id!r} run the tasks")
        else:
            if not running.wait_until_assigned(START_TIMEOUT_S):
                raise TimeoutError(
                    f"the example's worker was not assigned partitions of topic "
                    f"{settings.topic!r} within {START_TIMEOUT_S:.0f}s"
                )
            assert programs.subscriber is not None
            programs.subscriber.start()
        # A fleet's workers may still be joining: a schedule's change waits for one to apply it.
        wait_s = 30.0 if worker else START_TIMEOUT_S
        schedules = SchedulesClient(
            store=schedule_store, client=client, catalog=catalog, wait_s=wait_s
        )
        yield client, schedules, programs.runs, running


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
