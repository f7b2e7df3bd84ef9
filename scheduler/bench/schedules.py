"""schedules: N cron schedules firing at the same instant on one worker (issue 42).

Measured:

* fire -> run start: N schedules (default 10,000, `--size`) share one six-field cron that fires
  once a day at an instant chosen after the enables are expected to be done (a schedule ignores
  fires before its enable: the bench fails if the enables end after it). Each run's lag is
  `started_ms` minus that fire (p50, p99, max); first to last run start is the spread.
* event -> launch, one event at a time (300; 5 with --smoke): a landed partition (published on
  the events topic) -> the run its partition trigger launches (`created_ms`), and a completed
  run -> the run its program-status trigger launches, from the completed run's `ended_ms`;
* the same N cron jobs in APScheduler 3 (memory job store, its default thread pool, no misfire
  grace limit), in this process: lag of each job's call behind its fire.
* peak RSS of a fresh worker process started over a deployment holding M enabled schedules
  (default 100,000, `--enabled`; written by another process first, records and pending fires as
  enables leave them), beside the same worker over an empty deployment.

The programs are `command` programs whose route is, in the bench only, an in-process no-op: what
is measured is the schedules and programs layers (fire, launch, run), not a process per run.
Enables are sent without waiting (`wait_s=None`) and the store is then polled for the count;
the fired runs are counted by the no-op route as it is called (the run store is read once, at
the end, for their start times).
With `--backends kafka-cassandra`, the shared fire and event -> launch are measured on Kafka +
Cassandra too: a `scheduler worker` process (a fresh topic and keyspace, programs that run
`/bin/true`) runs the schedules, and this process creates them, publishes the events and reads the
run store (polled every 2 s for the fired runs: a run's `started_ms` is written once, so the poll
changes only when they are seen, not what is measured). A run's start is stamped before its
process is forked, but the forks share the worker's cores with the starts of later batches. The
RSS is measured embedded only.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scheduler.bench.common import (
    DISTRIBUTED,
    EMBEDDED,
    BenchOptions,
    RssSampler,
    ScenarioResult,
    lag_summary,
    now_ms,
)

PROGRAM = "bench-noop"
UPSTREAM = "bench-upstream"
"""The program whose completed runs trigger `AFTER` (a program-status trigger)."""
LANDED = "bench-landed"
"""The program a partition trigger launches."""
AFTER = "bench-after"
DATASET = "bench-dataset"
ENABLE_RATE_GUESS = 50.0
"""Creates + enables per second assumed to place the shared fire (a daily cron) after them: low
enough for a 2-core machine under others' load (10,000 took 126 s at a load average of 75); a
faster machine only waits longer for the fire, which does not change what is measured."""
START_TIMEOUT_S = 60.0


class _NoopRoute:
    """The `command` route of the bench: runs nothing, and counts the runs of each logical
    time, so that the bench waits on an event rather than polling the run store beside the
    worker (a poll reads every run, under the store's lock, in the worker's process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._waited: tuple[str, int, threading.Event] | None = None

    def __call__(self, task: Any, context: Any) -> None:
        logical = str((task.data.get("vars") or {}).get("_logical_time"))
        with self._lock:
            self._counts[logical] = self._counts.get(logical, 0) + 1
            waited = self._waited
            if waited is not None and waited[0] == logical and self._counts[logical] >= waited[1]:
                waited[2].set()

    def wait(self, logical: str, count: int, timeout_s: float) -> bool:
        """True once `count` runs of logical time `logical` have been called."""
        done = threading.Event()
        with self._lock:
            self._waited = (logical, count, done)
            if self._counts.get(logical, 0) >= count:
                done.set()
        return done.wait(timeout_s)


def _fire_at(seconds_ahead: float) -> int:
    """A whole second `seconds_ahead` from now (epoch ms)."""
    return (now_ms() + int(seconds_ahead * 1000)) // 1000 * 1000


def _daily_cron(fire_ms: int) -> str:
    """A six-field cron (UTC) that fires at `fire_ms`'s second, minute and hour: once a day, so
    one shared fire is measured and no later fire piles on its runs."""
    at = datetime.fromtimestamp(fire_ms / 1000, UTC)
    return f"{at.second} {at.minute} {at.hour} * * *"


class _Deployment:
    """An embedded scheduler in `data_dir` with programs and schedules, the `command` route a
    no-op; `enter` starts it."""

    def __init__(self, data_dir: Path) -> None:
        from scheduler.embedded import EmbeddedScheduler
        from scheduler.executors.registry import RoutingExecutor
        from scheduler.programs.catalog import ProgramCatalog
        from scheduler.programs.model import Program, ProgramKind
        from scheduler.programs.runtime import embedded_programs
        from scheduler.schedules.runtime import embedded_schedules

        self.catalog = ProgramCatalog(
            [
                Program(name, ProgramKind.COMMAND, {"argv": ["true"]}, {}, "does nothing")
                for name in (PROGRAM, UPSTREAM, LANDED, AFTER)
            ]
        )
        self.noop = _NoopRoute()
        self.executor = RoutingExecutor({"command": self.noop}, default="command")
        self.scheduler = EmbeddedScheduler(data_dir=data_dir, executor=self.executor)
        self.programs = embedded_programs(self.scheduler, self.executor, self.catalog)
        self.schedules = embedded_schedules(self.scheduler, self.programs, self.executor.routes)

    def enter(self, stack: ExitStack) -> Any:
        """Start the deployment (stopped when `stack` closes); its schedules client."""
        from scheduler.schedules.client import SchedulesClient

        stack.callback(self.schedules.store.close)
        stack.callback(self.programs.close)
        stack.enter_context(self.scheduler)
        stack.callback(self.programs.stop_subscriber)  # the run store closes after the engine
        assert self.programs.subscriber is not None
        self.programs.subscriber.start()
        return SchedulesClient(
            store=self.schedules.store,
            client=self.scheduler.client,
            catalog=self.catalog,
            wait_s=None,
        )


def _create_enabled(client: Any, names: list[str], cron: str, timeout_s: float) -> float:
    """Create and enable a schedule of `cron` per name without waiting on each; poll the store
    until all are enabled. The seconds it took."""
    from scheduler.schedules.model import Schedule, Time

    started = time.perf_counter()
    batch = 1000
    for first in range(0, len(names), batch):
        client.create(
            [
                Schedule(name=n, program=PROGRAM, trigger=Time(cron=cron, time_zone="UTC"))
                for n in names[first : first + batch]
            ],
            source="bench",
        )
    _wait_for(client, None, names, timeout_s)
    _enable_all(client, names, batch)
    _wait_for(client, "ENABLED", names, timeout_s)
    return time.perf_counter() - started


def _enable_all(client: Any, names: list[str], batch: int) -> None:
    """Send the enable changes of `names` in bulk (`schedule_tasks`, `batch` per call), as
    `SchedulesClient.enable` would send them one by one, without its per-name check and wait:
    the schedules were just created, disabled."""
    import uuid

    from scheduler.schedules.tasks import change_task

    for first in range(0, len(names), batch):
        at = now_ms()
        changes = [
            change_task(name, at, uuid.uuid4().hex, "enable")
            for name in names[first : first + batch]
        ]
        client.client.schedule_tasks(changes).result(60)


def _wait_for(client: Any, status: str | None, names: list[str], timeout_s: float) -> None:
    """Poll the store until every schedule of `names` exists (with `status`, if given)."""
    wanted = set(names)
    deadline = time.monotonic() + timeout_s
    while True:
        seen = len(wanted.intersection(r.schedule.name for r in client.all(status=status)))
        if seen == len(wanted):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"only {seen} of {len(wanted)} schedules were {status or 'created'} within "
                f"{timeout_s:.0f}s: the worker applies the changes too slowly on this machine"
            )
        time.sleep(0.2)


def _fire_lags(scratch: Path, count: int) -> dict[str, Any]:
    """N schedules on one embedded worker, one shared fire: each run's start behind it."""
    with ExitStack() as stack:
        deployment = _Deployment(scratch / "fire")
        client = deployment.enter(stack)
        fire, logical, enable_s = _share_a_fire(client, count)
        deployment.noop.wait(logical, count, (fire - now_ms()) / 1000 + 60 + count / 50)
        started = _started(deployment.programs.runs, logical, count)
    return _fire_summary(fire, logical, enable_s, started)


def _share_a_fire(client: Any, count: int) -> tuple[int, str, float]:
    """Create and enable `count` schedules sharing one fire: the fire (epoch ms), its logical
    time as a run receives it, and the seconds the enables took."""
    from scheduler.model import from_epoch_ms

    fire = _fire_at(10.0 + count / ENABLE_RATE_GUESS)
    names = [f"bench-{i:06d}" for i in range(count)]
    enable_s = _create_enabled(client, names, _daily_cron(fire), 120 + count / 50)
    if now_ms() >= fire:
        raise TimeoutError(
            f"creating and enabling {count} schedules took {enable_s:.0f}s, past the shared "
            f"fire: lower ENABLE_RATE_GUESS ({ENABLE_RATE_GUESS:g}/s) for this machine"
        )
    return fire, from_epoch_ms(fire).isoformat(), enable_s


def _started(runs: Any, logical: str, count: int) -> list[int]:
    """The start times of the runs of the shared fire (logical time `logical`) stored so far."""
    return [
        r.started_ms
        for r in runs.list_runs(program=PROGRAM, limit=4 * count)
        if r.started_ms is not None and r.arguments.get("_logical_time") == logical
    ]


def _fire_summary(fire: int, logical: str, enable_s: float, started: list[int]) -> dict[str, Any]:
    return {
        "enable_s": enable_s,
        "started": len(started),
        "fire_utc": logical,
        "spread_ms": float(max(started) - min(started)) if started else float("nan"),
        **lag_summary([float(s - fire) for s in started]),
    }


def _polled_fire_lags(client: Any, runs: Any, count: int) -> dict[str, Any]:
    """The shared fire on a worker in another process: the run store is polled for its runs."""
    fire, logical, enable_s = _share_a_fire(client, count)
    deadline = fire / 1000 + 60 + count / 50
    time.sleep(max(0.0, fire / 1000 - time.time()))
    while len(started := _started(runs, logical, count)) < count and time.time() < deadline:
        time.sleep(2.0)
    return _fire_summary(fire, logical, enable_s, started)


def _newest_run(
    runs: Any, program: str, seen: set[str], timeout_s: float, poll_s: float = 0.002
) -> Any:
    """The newest run of `program` not in `seen` (added to it), polled every `poll_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for run in runs.list_runs(program=program, limit=1):
            if run.run_id not in seen:
                seen.add(run.run_id)
                return run
        time.sleep(poll_s)
    raise TimeoutError(f"no new run of {program!r} within {timeout_s:.0f}s")


def _create_triggered(client: Any) -> None:
    """The two event-triggered schedules, created and enabled (waiting on the store)."""
    from scheduler.schedules.model import Partition, ProgramStatus, RunStatus, Schedule

    client.create(
        [
            Schedule(
                name="bench-on-partition",
                program=LANDED,
                trigger=Partition(dataset=DATASET, num_partitions=1),
            ),
            Schedule(
                name="bench-on-status",
                program=AFTER,
                trigger=ProgramStatus(program=UPSTREAM, statuses={RunStatus.COMPLETED}),
            ),
        ],
        source="bench",
    )
    names = ["bench-on-partition", "bench-on-status"]
    _wait_for(client, None, names, 120)
    for name in names:
        client.enable(name)
    _wait_for(client, "ENABLED", names, 120)


def _measure_events(
    runs: Any, publisher: Any, tasks: Any, count: int, poll_s: float
) -> dict[str, dict[str, float]]:
    """One event at a time, `count` of each kind: a landed partition published -> the run its
    trigger launched (`created_ms`), and an upstream run's end -> the run it triggered."""
    from scheduler.programs.launch import LaunchRequest
    from scheduler.programs.model import StartedBy, StarterKind

    partition_lags: list[float] = []
    status_lags: list[float] = []
    # The part after the event's record time (the launch's requested time): what the worker's
    # subscriber, the schedule's task and the launch took, without the event's own publish.
    partition_after: list[float] = []
    status_after: list[float] = []
    seen: set[str] = set()
    for i in range(count):
        published = now_ms()
        publisher.publish_partitions(DATASET, [f"p{i:06d}"]).result(30)
        run = _newest_run(runs, LANDED, seen, 60, poll_s)
        partition_lags.append(float(run.created_ms - published))
        partition_after.append(float(run.created_ms - run.requested_ms))
    for i in range(count):
        request = LaunchRequest(
            program=UPSTREAM,
            request_key=f"bench-upstream-{i}",
            started_by=StartedBy(StarterKind.OPERATOR, "bench"),
            requested_at=datetime.now(UTC),
            properties={},
            system={},
        )
        tasks.schedule_task(request.task()).result(30)
        after = _newest_run(runs, AFTER, seen, 60, poll_s)
        upstream = runs.get(str(after.arguments.get("_triggering.run.id")))
        ended = upstream.ended_ms if upstream is not None else None
        if ended is not None:
            status_lags.append(float(after.created_ms - ended))
        status_after.append(float(after.created_ms - after.requested_ms))
    return {
        "partition": lag_summary(partition_lags),
        "program_status": lag_summary(status_lags),
        "partition_from_record": lag_summary(partition_after),
        "program_status_from_record": lag_summary(status_after),
    }


def _event_lags(scratch: Path, count: int) -> dict[str, dict[str, float]]:
    """Event -> launch on one embedded deployment in this process."""
    deployment = _Deployment(scratch / "events")
    with ExitStack() as stack:
        client = deployment.enter(stack)
        _create_triggered(client)
        return _measure_events(
            deployment.programs.runs,
            deployment.programs.publisher,
            deployment.scheduler.client,
            count,
            0.002,
        )


PROGRAMS_TOML = "".join(
    f'[programs.{name}]\nkind = "command"\nargv = ["/bin/true"]\n\n'
    for name in (PROGRAM, UPSTREAM, LANDED, AFTER)
)
"""The bench's programs for a `scheduler worker` process: `/bin/true`, forked per run (a worker
process has no in-process no-op route; what is measured ends at the run's creation)."""


def _distributed(
    options: BenchOptions, count: int, events_count: int
) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """The shared fire of `count` schedules, then event -> launch, on Kafka + Cassandra: a
    `scheduler worker` process (programs on, a fresh topic and keyspace) runs the schedules; this
    process creates them, publishes the events on the events topic, starts the upstream runs,
    and reads the run store in Cassandra."""
    from scheduler.bench.workers import backend, run_settings
    from scheduler.client import SchedulerClient
    from scheduler.programs.catalog import load_programs
    from scheduler.programs.events import EventPublisher
    from scheduler.programs.runtime import build_events_log, open_run_store
    from scheduler.runtime import open_store
    from scheduler.schedules.client import SchedulesClient
    from scheduler.schedules.runtime import open_schedule_store

    with ExitStack() as stack:
        run = stack.enter_context(
            backend(DISTRIBUTED, options, "schedules-events", executor="auto")
        )
        programs = run.directory / "programs.toml"
        programs.write_text(PROGRAMS_TOML, encoding="utf-8")
        run.env["SCHEDULER_PROGRAMS_FILE"] = str(programs)
        settings = run_settings(run)
        store = open_store(settings, create_schema=True)
        stack.callback(store.close)
        schedules = open_schedule_store(settings, store, create_schema=True)
        stack.callback(schedules.close)
        runs = open_run_store(settings, store, create_schema=True)
        stack.callback(runs.close)
        events_log = build_events_log(settings)
        stack.callback(events_log.close)
        events_log.ensure_topic(settings.partitions)
        publisher = EventPublisher(events_log)
        stack.callback(publisher.close)
        tasks = SchedulerClient(log=run.log, grace_window_s=settings.grace_window_s)
        stack.callback(tasks.close)
        run.start_worker("schedules-worker")
        run.wait_assigned()
        client = SchedulesClient(
            store=schedules, client=tasks, catalog=load_programs(programs), wait_s=None
        )
        fire = _polled_fire_lags(client, runs, count)
        _create_triggered(client)
        return fire, _measure_events(runs, publisher, tasks, events_count, 0.005)


def _apscheduler_lags(count: int) -> dict[str, Any]:
    """The same N cron jobs in APScheduler 3, memory store, one shared fire."""
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger

    calls: list[float] = []
    lock = threading.Lock()
    done = threading.Event()

    def job() -> None:
        at = time.time() * 1000
        with lock:
            calls.append(at)
            if len(calls) >= count:
                done.set()

    scheduler = BackgroundScheduler(
        timezone=UTC, job_defaults={"misfire_grace_time": None, "coalesce": False}
    )
    scheduler.start()
    try:
        fire = _fire_at(3.0 + count / 5000)
        at = datetime.fromtimestamp(fire / 1000, UTC)
        trigger = CronTrigger(hour=at.hour, minute=at.minute, second=at.second, timezone=UTC)
        added = time.perf_counter()
        for i in range(count):
            scheduler.add_job(job, trigger, id=f"bench-{i}", max_instances=1)
        add_s = time.perf_counter() - added
        done.wait(timeout=(fire - now_ms()) / 1000 + 60 + count / 50)
    finally:
        scheduler.shutdown(wait=False)
    with lock:
        first = [c for c in calls if c >= fire - 1000][:count]
    lags = [c - fire for c in first]
    return {
        "enable_s": add_s,
        "started": len(first),
        "fire_utc": datetime.fromtimestamp(fire / 1000, UTC).isoformat(),
        "spread_ms": max(first) - min(first) if first else float("nan"),
        **lag_summary(lags),
    }


HELD_CRON = "0 0 1 1 *"
"""The cron of the held schedules: yearly, never due during the bench."""


def _prepare_held(data_dir: str, count: int) -> None:
    """In a process of its own: `count` enabled schedules in a deployment's stores, as their
    enables leave them (the record enabled, its next fire a row of the fire index and the tick of
    its instant and shard a pending engine task persisted by the worker), then stopped. Written
    directly rather than through 2 x `count` change tasks: the state is the same, made in
    seconds rather than many minutes."""
    from scheduler.schedules.abc import FireRow, ScheduleRecord
    from scheduler.schedules.fires import shard_of, tick_task
    from scheduler.schedules.model import Schedule, Time

    with ExitStack() as stack:
        deployment = _Deployment(Path(data_dir))
        client = deployment.enter(stack)
        store = deployment.schedules.store
        at = now_ms()
        for first in range(0, count, 1000):
            rows = []
            for i in range(first, min(first + 1000, count)):
                schedule = Schedule(
                    name=f"held-{i:07d}",
                    program=PROGRAM,
                    trigger=Time.model_validate({"cron": HELD_CRON, "timeZone": "UTC"}),
                )
                fire = schedule.crons()[0].next_after(at)
                store.put(
                    ScheduleRecord(
                        schedule, revision=at, enabled=True, created_ms=at, updated_ms=at,
                        change_id=f"bench-{i}", last_fires={"0": at}, next_fires={"0": fire},
                    )
                )  # fmt: skip
                rows.append(FireRow(fire, shard_of(schedule.name), schedule.name, 0, at))
            store.put_fires(rows)
            ticks = {(row.shard, row.fire_ms) for row in rows}
            client.client.schedule_tasks([tick_task(*tick) for tick in sorted(ticks)]).result(60)
        worker = deployment.scheduler.worker
        deadline = time.monotonic() + 600
        while any(lag.lag for lag in worker.log.describe_group(worker.group_id)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the worker did not persist {count} fires within 600s")
            time.sleep(0.2)
        if sum(1 for _ in client.all(status="ENABLED")) != count:
            raise RuntimeError(f"the store does not hold {count} enabled schedules")


def _hold(data_dir: str, ready: Any, stop: Any) -> None:
    """In a process of its own: a started worker over the deployment in `data_dir` (whatever
    schedules it holds); `ready` is set once its partitions are assigned."""
    with ExitStack() as stack:
        _Deployment(Path(data_dir)).enter(stack)
        ready.set()
        stop.wait(600)


def _worker_rss(scratch: Path, count: int, settle_s: float) -> dict[str, float]:
    """Peak and settled RSS (MB) of a fresh worker process over a deployment holding `count`
    enabled schedules, prepared by another process first (so that what the worker holds is
    measured, not what creating them cost a client)."""
    context = multiprocessing.get_context("spawn")
    data_dir = scratch / f"rss-{count}"
    prepared_s = 0.0
    if count:
        started = time.perf_counter()
        preparer = context.Process(target=_prepare_held, args=(str(data_dir), count))
        preparer.start()
        preparer.join(1800)
        if preparer.exitcode != 0:
            raise RuntimeError(f"preparing {count} enabled schedules failed ({preparer.exitcode})")
        prepared_s = time.perf_counter() - started
    ready, stop = context.Event(), context.Event()
    process = context.Process(target=_hold, args=(str(data_dir), ready, stop))
    process.start()
    assert process.pid is not None
    sampler = RssSampler(process.pid).start()
    try:
        if not ready.wait(300):
            raise TimeoutError(f"the worker over {count} enabled schedules did not start in time")
        time.sleep(settle_s)
        settled = sampler.latest_mb()
    finally:
        stop.set()
        process.join(60)
        sampler.stop()
        if process.is_alive():
            process.kill()
    return {"rss_peak_mb": sampler.peak_mb, "rss_settled_mb": settled, "prepare_s": prepared_s}


def run(options: BenchOptions) -> ScenarioResult:
    count = options.pick(10_000, 20)
    held = options.backlog if options.backlog is not None else (200 if options.smoke else 100_000)
    events_count = 5 if options.smoke else 300
    result = ScenarioResult("schedules")
    result.details.update(cpus=os.cpu_count())
    if options.wants("embedded"):
        _embedded(options, result, count, held, events_count)
    if options.wants(DISTRIBUTED):
        try:
            fire, events = _distributed(options, count, events_count)
        except Exception as error:
            result.backend_failed(DISTRIBUTED, error)
        else:
            _add_fire(result, f"ours on {DISTRIBUTED}", fire, count)
            _add_events(result, events, DISTRIBUTED)
            result.details[DISTRIBUTED] = {"fire": fire, "events": events}
    result.details.update(load_average=os.getloadavg())
    result.notes.append(
        "p50/p99/max: the shared cron fire -> each run's start (ours) / each job's call "
        "(APScheduler); event -> launch: the event published (or the upstream run's end) -> the "
        "triggered run's creation; embedded programs run on an in-process no-op route; targets: "
        "p99 < 1 s, RSS within 50 MB of an idle worker"
    )
    return result


def _add_fire(
    result: ScenarioResult, side: str, lag: dict[str, Any], count: int, *, ours: bool = True
) -> None:
    """The row of one side's shared fire; for ours, a note if any fired run did not start."""
    result.add(
        side=side,
        schedules=count,
        started=lag["started"],
        setup_s=round(lag["enable_s"], 2),
        p50_ms=round(lag["p50_ms"], 1),
        p99_ms=round(lag["p99_ms"], 1),
        max_ms=round(lag["max_ms"], 1),
    )
    if ours and lag["started"] < count:
        result.notes.append(
            f"{side}: only {lag['started']} of {count} runs started: it must be all"
        )


def _add_events(result: ScenarioResult, events: dict[str, dict[str, float]], kind: str) -> None:
    where = "" if kind == EMBEDDED else f" on {kind}"
    for trigger, lag in events.items():
        if trigger.endswith("_from_record"):
            continue  # in the details only
        result.add(
            side=f"ours{where}, {trigger.replace('_', '-')} trigger: event -> launch",
            schedules=1,
            started=lag["count"],
            p50_ms=round(lag["p50_ms"], 1),
            p99_ms=round(lag["p99_ms"], 1),
            max_ms=round(lag["max_ms"], 1),
        )


def _embedded(
    options: BenchOptions, result: ScenarioResult, count: int, held: int, events_count: int
) -> None:
    """The shared fire beside APScheduler, event -> launch and the RSS, embedded."""
    ours = _fire_lags(options.scratch, count)
    peer = _apscheduler_lags(count)
    _add_fire(result, "ours (embedded)", ours, count)
    _add_fire(result, "APScheduler 3 (memory)", peer, count, ours=False)
    events = _event_lags(options.scratch, events_count)
    _add_events(result, events, EMBEDDED)
    settle_s = 1.0 if options.smoke else 5.0
    idle = _worker_rss(options.scratch, 0, settle_s)
    loaded = _worker_rss(options.scratch, held, settle_s)
    result.add(
        side=f"worker RSS, {held:,} enabled vs idle",
        schedules=held,
        rss_idle_peak_mb=round(idle["rss_peak_mb"], 1),
        rss_peak_mb=round(loaded["rss_peak_mb"], 1),
        rss_settled_mb=round(loaded["rss_settled_mb"], 1),
        rss_over_idle_mb=round(loaded["rss_peak_mb"] - idle["rss_peak_mb"], 1),
    )
    result.details.update(
        fire=ours, apscheduler=peer, events=events, rss_idle=idle, rss_loaded=loaded, held=held,
    )  # fmt: skip
    if peer["started"] < count:
        result.notes.append(f"APScheduler ran {peer['started']} of {count} jobs")
