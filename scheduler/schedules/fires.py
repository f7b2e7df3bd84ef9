"""The fire index and its ticks: the cron fires of one instant handled as one piece of work.

A schedule whose trigger is one cron and that has no constraint (an *indexed* schedule: its fire
always launches) does not get a fire task of its own. Its next fire is a row of the fire index
(`FireRow`: instant, shard, name, cron, revision) and one *tick* task per instant and shard
(ordering id `fires:<shard>`, key `tick` at the instant: every schedule of that instant sends
the same key, which the engine keeps once). The tick, in `tick()`:

1. reads its instant's rows and the schedules' records in one read each, and skips a row whose
   schedule is gone, disabled, of another revision or no longer expecting this fire (a disable
   or update that raced the row leaves it stale, never acted on);
2. sends a late row (past `LATE_MS`, or its next fire due already: a catch-up decision) to the
   schedule's own fire task, which applies the catch-up policy as for any schedule;
3. for the others, adds the fire to the schedule's latest job (the same pure state machine, so
   the same job key and run id as a fire task makes), sends the launches as `launch-many`
   tasks (one per program and batch, in the program's queue: runs are still created only there,
   so concurrency limits are decided as before), writes the jobs, writes and announces the
   next rows, and advances each record's fire state with a compare-and-set on the text it
   read (`ScheduleStore.replace_many`): a record its own queue changed meanwhile is left as
   that queue wrote it;
4. deletes its instant's rows.

Every step is safe to repeat: a tick re-executed after a crash skips the records it advanced,
and a job already holding this fire was written after its launch, so it launches nothing again.

Writers outside a shard's queue (a schedule's enable, update, or a late fire) index a fire only
if it is at least `ENROLL_MARGIN_MS` away; a nearer one gets its own fire task, so that a row is
never written after its instant's tick ran. Rows written by a tick need no margin: the next tick
of the shard runs after it, in the same queue.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler import metrics
from scheduler.model import Task, from_epoch_ms
from scheduler.programs.launch import LAUNCH_BATCH, LaunchRequest, launch_batches
from scheduler.schedules import job as jobs
from scheduler.schedules.abc import FireRow
from scheduler.schedules.catchup import LATE_MS
from scheduler.schedules.events import TimeFired
from scheduler.schedules.job_gauge import jobs_moved
from scheduler.schedules.tasks import SCHEDULES_EXECUTOR, fire_task

if TYPE_CHECKING:
    from scheduler.schedules.abc import ScheduleRecord
    from scheduler.schedules.executor import ScheduleExecutor
    from scheduler.schedules.model import Schedule

logger = logging.getLogger(__name__)

FIRE_SHARDS = 8
"""Tick queues per instant. Fixed: a row is read back under the shard its name hashes to."""
ENROLL_MARGIN_MS = 5_000
"""A fire nearer than this to the writer's clock gets its own fire task instead of a row."""
TICK_QUEUE = "fires:"


def shard_of(name: str) -> int:
    return zlib.crc32(name.encode()) % FIRE_SHARDS


def indexed(schedule: Schedule) -> bool:
    """Whether the schedule's fires go through the index: one cron and no constraint."""
    return schedule.trigger.type == "TIME" and not schedule.constraints


def tick_task(shard: int, fire_ms: int) -> Task:
    return Task(
        f"{TICK_QUEUE}{shard}",
        from_epoch_ms(fire_ms),
        "tick",
        {"executor": SCHEDULES_EXECUTOR, "op": "tick", "shard": shard},
    )


def send_fire(
    executor: ScheduleExecutor, record: ScheduleRecord, index: int, fire_ms: int
) -> Future[int]:
    """Have cron `index` of `record` fire at `fire_ms`: a row and its tick if the schedule is
    indexed and the fire far enough away, else the schedule's own fire task. Await the future
    before writing the record that names the fire."""
    if indexed(record.schedule) and fire_ms - executor.clock() >= ENROLL_MARGIN_MS:
        row = FireRow(fire_ms, shard_of(record.name), record.name, index, record.revision)
        executor.store.put_fires([row])
        return executor.client.schedule_task(tick_task(row.shard, fire_ms))
    return executor.client.schedule_task(fire_task(record.name, record.revision, index, fire_ms))


@dataclass(frozen=True, slots=True)
class _Due:
    row: FireRow
    record: ScheduleRecord
    text: str
    following: int


def tick(executor: ScheduleExecutor, task: Task) -> None:
    """Fire the indexed schedules of one instant and shard (see the module doc)."""
    store = executor.store
    shard, fire_ms = int(task.data["shard"]), task.scheduled_ms
    rows = store.fires(fire_ms, shard)
    if not rows:
        return
    stored = store.get_versioned(sorted({row.name for row in rows}))
    now = max(executor.clock(), fire_ms)
    late: list[Task] = []
    due: list[_Due] = []
    seen: set[str] = set()
    after: dict[tuple[str, str], int] = {}
    for row in rows:
        found = stored.get(row.name)
        if found is None:
            continue
        record, text = found
        index = str(row.cron)
        crons = record.schedule.crons()
        if (
            not record.enabled
            or record.revision != row.revision
            or record.next_fires.get(index) != fire_ms
            or record.last_fires.get(index, 0) >= fire_ms
            or row.cron >= len(crons)
        ):
            continue  # stale: disabled, updated, deleted or handled since the row was written
        cron = crons[row.cron]
        key = (cron.expression, cron.time_zone)
        if key not in after:  # schedules sharing an instant mostly share their crons too
            after[key] = cron.next_after(fire_ms)
        following = after[key]
        late_fire = now - fire_ms > LATE_MS or following <= now
        # Two crons of one record at one instant: one compare-and-set per record and tick.
        if not indexed(record.schedule) or late_fire or row.name in seen:
            late.append(fire_task(row.name, row.revision, row.cron, fire_ms))
        else:
            seen.add(row.name)
            due.append(_Due(row, record, text, following))
    waits: list[Future[int]] = []
    if late:
        waits.append(executor.client.schedule_tasks(late))
    _launch(executor, due, shard, fire_ms, now)
    if due:
        store.put_fires(
            [FireRow(d.following, shard, d.row.name, d.row.cron, d.row.revision) for d in due]
        )
        ticks = sorted({d.following for d in due})
        waits.append(executor.client.schedule_tasks([tick_task(shard, f) for f in ticks]))
    for wait in waits:
        wait.result(executor.timeout_s)
    advanced = [
        (
            d.text,
            d.record.changed(
                last_fires={**d.record.last_fires, str(d.row.cron): fire_ms},
                next_fires={**d.record.next_fires, str(d.row.cron): d.following},
            ),
        )
        for d in due
    ]
    replaced = store.replace_many(advanced)
    for d in due:
        if d.row.name not in replaced:
            logger.info(
                "schedule %s changed during its fire at %d: left as changed", d.row.name, fire_ms
            )
    store.delete_fires(fire_ms, shard)


def _launch(
    executor: ScheduleExecutor, due: Sequence[_Due], shard: int, fire_ms: int, now: int
) -> None:
    """Add the fire to each due schedule's latest job (their jobs read in one `jobs_of`), send
    the launches (one `launch-many` task per program and `LAUNCH_BATCH` runs, in the program's
    queue, where every run is created), then write the jobs. A batch is sent as soon as it is
    full, so the program's queue starts its runs while the tick decides the rest; the batches
    are the ones `launch_batches` makes of each program's requests in the order of `due`. A job
    holding this fire already (the tick re-executed) is not written again, but its launch is
    sent again, so that the batches are the same tasks."""
    store = executor.store
    requests: dict[str, list[LaunchRequest]] = {}
    sent: list[Future[int]] = []
    written: list[tuple[jobs.Job, list[jobs.Job]]] = []
    histories = store.jobs_of([d.row.name for d in due])
    key = f"tick:{shard}"
    for d in due:
        record = d.record
        cron = record.schedule.crons()[d.row.cron]
        history = histories.get(record.name, [])
        mine = [j for j in history if j.revision == record.revision]
        latest = mine[-1] if mine else jobs.new_job(record.schedule, record.revision)
        event = TimeFired(cron=cron.expression, time_zone=cron.time_zone, logical_time_ms=fire_ms)
        job, effects = jobs.add_event(latest, event, now)
        launch = next((e for e in effects if isinstance(e, jobs.Launch)), None)
        if launch is None and event in latest.events:
            job = latest  # written by the tick's first try, after its launch was sent
            args = jobs.run_arguments(job, now)
            launch = jobs.Launch(job.key, record.schedule.program, args)
        elif launch is not None:
            metrics.SCHEDULE_FIRES.inc()
            written.append((job, history))
        if launch is None:
            continue
        fired = fire_task(record.name, record.revision, d.row.cron, fire_ms)
        request = executor.launch_request(record.schedule, job, launch, fired)
        waiting = requests.setdefault(request.program, [])
        waiting.append(request)
        if len(waiting) == LAUNCH_BATCH:
            sent.append(executor.client.schedule_tasks(launch_batches(waiting, key)))
            waiting.clear()
    batches = [
        task
        for program in sorted(requests)
        if requests[program]
        for task in launch_batches(requests[program], key)
    ]
    if batches:
        sent.append(executor.client.schedule_tasks(batches))
    for wait in sent:
        wait.result(executor.timeout_s)
    gone: list[tuple[str, str]] = []
    below: list[tuple[str, str]] = []
    for job, history in written:
        jobs_moved(None, job.state)
        trim = jobs.trim(history, job)
        for old in trim.gone:
            jobs_moved(old.state, None)
        name = job.schedule.name
        gone += [(name, key) for key in trim.one_by_one]
        below += [(name, trim.below)] if trim.below else []
    if written:
        store.put_jobs([job for job, _ in written], delete=gone, below=below)
