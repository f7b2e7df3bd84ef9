"""The `schedules` executor route: runs the tasks of every schedule's queue (`schedule:<name>`).

Each task loads the schedule's record and jobs from the schedule store, applies the pure state
machine (`job.py`) at the engine clock's `now`, and carries out the effects: follow-up tasks
(the next fire, a constraint re-check at the instant a Wait names, the job's timeout, a launch
request in the program's queue) are enqueued FIRST, and the new state is written after. A task
re-executed after a crash recomputes the same follow-ups under the same keys (which the engine
runs once) before it writes, so a crash at any point neither loses a launch nor makes two: the
launch's request key is the job's key, and the run id is derived from it.

Tasks of a revision other than the record's (a schedule updated or deleted since) and events for
a disabled schedule do nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scheduler import metrics
from scheduler.client import SchedulerClient
from scheduler.engine.clock import now_ms
from scheduler.errors import TaskDataError
from scheduler.executors.abc import ExecutionContext
from scheduler.model import Task, from_epoch_ms
from scheduler.programs.abc import RunStore
from scheduler.programs.launch import LaunchRequest
from scheduler.programs.model import RunStatus as ProgramRunStatus
from scheduler.programs.model import StartedBy, StarterKind
from scheduler.schedules import job as jobs
from scheduler.schedules.abc import ScheduleRecord, ScheduleStore
from scheduler.schedules.catchup import LATE_MS, fires_to_run
from scheduler.schedules.constraints import ConstraintContext, FinishedRun
from scheduler.schedules.events import Event, PartitionsAdded, RunEnded, TimeFired
from scheduler.schedules.fires import send_fire, tick
from scheduler.schedules.job import Effect, Job, JobState
from scheduler.schedules.job_gauge import jobs_moved
from scheduler.schedules.model import Concurrency, LastRun, RunStatus, Schedule
from scheduler.schedules.tasks import SCHEDULES_EXECUTOR, check_task, timeout_task

logger = logging.getLogger(__name__)

RUN_END_KEY = "run-end:"
_ENDED = (ProgramRunStatus.COMPLETED, ProgramRunStatus.FAILED, ProgramRunStatus.KILLED)


class ScheduleExecutor:
    """Runs the tasks of schedule queues (route name: `schedules`)."""

    def __init__(
        self,
        *,
        store: ScheduleStore,
        runs: RunStore,
        client: SchedulerClient,
        clock: Callable[[], int] = now_ms,
        timeout_s: float = 60.0,
    ) -> None:
        self.store = store
        self.runs = runs
        self.client = client
        """Enqueues follow-ups; its grace window must admit a task re-executed late."""
        self.clock = clock
        self.timeout_s = timeout_s

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        self.handle(task)

    def handle(self, task: Task) -> None:
        name = task.ordering_id.removeprefix("schedule:")
        op = task.data.get("op")
        if op == "change":
            from scheduler.schedules.lifecycle import apply_change

            apply_change(self, name, task)
        elif op == "fire":
            self.fire(name, task)
        elif op == "tick":
            tick(self, task)
        elif op == "event":
            self.event(name, task)
        elif op in ("check", "timeout"):
            self.check_or_timeout(name, task, op)
        elif op == "launch-refused":
            self.refused(name, task)
        else:
            raise TaskDataError(
                f"task {task.key} asks the schedules executor for op {op!r}; "
                "use change, fire, tick, event, check, timeout or launch-refused"
            )

    # -- reading state -------------------------------------------------------------------------

    def _current(self, name: str, revision: int | None = None) -> ScheduleRecord | None:
        record = self.store.get(name)
        if record is None or (revision is not None and record.revision != revision):
            return None
        return record

    def latest_job(self, record: ScheduleRecord) -> Job:
        mine = [j for j in self.store.jobs(record.name) if j.revision == record.revision]
        return mine[-1] if mine else jobs.new_job(record.schedule, record.revision)

    def _job(self, record: ScheduleRecord, key: str) -> Job | None:
        return next((j for j in self.store.jobs(record.name) if j.key == key), None)

    def context(self, schedule: Schedule) -> ConstraintContext:
        """What the schedule's constraints need to know of its program's runs, and no more: a
        schedule without concurrency or last-run constraints reads no run."""
        kinds = {type(c) for c in schedule.constraints}
        if Concurrency not in kinds and LastRun not in kinds:
            return ConstraintContext()
        program = schedule.program
        active = len(self.runs.active(program))
        if LastRun not in kinds:
            return ConstraintContext(active_runs=active)
        ended = self.runs.list_runs(program=program, statuses=_ENDED, limit=1)
        completed = self.runs.list_runs(
            program=program, statuses={ProgramRunStatus.COMPLETED}, limit=1
        )
        return ConstraintContext(
            active_runs=active,
            last_run=_finished(ended[0]) if ended else None,
            last_completed=_finished(completed[0]) if completed else None,
        )

    # -- fires and events ----------------------------------------------------------------------

    def fire(self, name: str, task: Task) -> None:
        record = self._current(name, int(task.data["revision"]))
        if record is None or not record.enabled:
            return
        index = str(task.data["cron"])
        crons = record.schedule.crons()
        fire_ms = task.scheduled_ms
        last = record.last_fires.get(index, 0)
        if fire_ms <= last:
            return  # handled already (the task ran again after a crash)
        cron = crons[int(index)]
        now = max(self.clock(), fire_ms)
        after_fire = cron.next_after(fire_ms)
        on_time = record.next_fires.get(index) == fire_ms and now - fire_ms <= LATE_MS
        if on_time and after_fire > now:
            # The fire the record enqueued, on time, and the next not due yet: no fire lies
            # between the last one handled and this one, so this one alone runs under every
            # catch-up policy (what `fires_to_run` finds, in one step of the cron, not three).
            fires = [fire_ms]
        else:
            fires = fires_to_run(record.schedule, cron, last, now)
        following = after_fire if after_fire > now else cron.next_after(now)
        # The next fire is sent now and awaited before the record that names it is written; in
        # between, the launch's own send and wait overlap its commit.
        next_sent = send_fire(self, record, int(index), following)
        job = self.latest_job(record)
        for fire in fires:
            metrics.SCHEDULE_FIRES.inc()
            event = TimeFired(cron=cron.expression, time_zone=cron.time_zone, logical_time_ms=fire)
            job = self.add_event(record, job, event, now, task)
        next_sent.result(self.timeout_s)
        self.store.put(
            record.changed(
                last_fires={**record.last_fires, index: max([fire_ms, *fires])},
                next_fires={**record.next_fires, index: following},
            )
        )

    def event(self, name: str, task: Task) -> None:
        record = self._current(name)
        if record is None or not record.enabled:
            logger.debug("schedule %s is missing or disabled: event dropped", name)
            return
        now = self.clock()
        data = task.data.get("event")
        if data is not None:
            event = _event(data)
            self.add_event(record, self.latest_job(record), event, now, task)
        if task.data.get("run_ended"):
            for waiting in self.store.jobs(name):
                if (
                    waiting.revision == record.revision
                    and waiting.state is JobState.PENDING_CONSTRAINT
                ):
                    after, effects = jobs.recheck(waiting, self.context(record.schedule), now)
                    self.carry_out(record, after, effects, now, task)
            self._stop_waiting_if_idle(record)

    def add_event(
        self, record: ScheduleRecord, job: Job, event: Event, now: int, task: Task
    ) -> Job:
        after, effects = jobs.add_event(job, event, now)
        for effect in effects:
            if isinstance(effect, jobs.JobEnded) and effect.job_key == job.key != after.key:
                # The job timed out as this event started the next generation.
                self._write_job(
                    job.model_copy(update={"state": effect.state, "reason": effect.reason})
                )
        return self.carry_out(record, after, effects, now, task)

    # -- checks, timeouts, refusals -----------------------------------------------------------

    def check_or_timeout(self, name: str, task: Task, op: str) -> None:
        record = self._current(name, int(task.data["revision"]))
        job = None if record is None else self._job(record, str(task.data["job"]))
        if record is None or job is None:
            return
        now = max(self.clock(), task.scheduled_ms)
        if op == "check":
            after, effects = jobs.recheck(job, self.context(record.schedule), now)
        else:
            after, effects = jobs.expire(job, now)
        self.carry_out(record, after, effects, now, task)
        self._stop_waiting_if_idle(record)

    def refused(self, name: str, task: Task) -> None:
        """The program's queue refused a launch at its concurrency limit (another schedule or
        an operator took the last slot since the job's check): wait for a run to end if the
        schedule's concurrency constraint waits, else the job aborts."""
        record = self._current(name)
        job = None if record is None else self._job(record, str(task.data["request_key"]))
        if record is None or job is None or job.state is not JobState.PENDING_LAUNCH:
            return
        if job.revision != record.revision:  # updated since: the old job does not wait on
            reason = "launch refused after the schedule was updated"
            self._write_job(job.model_copy(update={"state": JobState.OBSOLETE, "reason": reason}))
            return
        waits = any(
            isinstance(c, Concurrency) and c.wait_until_met for c in record.schedule.constraints
        )
        if waits:
            self.store.add_key(RUN_END_KEY + record.schedule.program, name)
            self._write_job(job.model_copy(update={"state": JobState.PENDING_CONSTRAINT}))
            return
        reason = (
            f"launch refused: {task.data.get('active')} run(s) of program "
            f"{task.data.get('program')!r} active, at most {task.data.get('limit')} allowed"
        )
        self._write_job(job.model_copy(update={"state": JobState.ABORTED, "reason": reason}))
        metrics.CONSTRAINT_ABORTS.inc()

    # -- effects --------------------------------------------------------------------------------

    def carry_out(
        self,
        record: ScheduleRecord,
        job: Job,
        effects: tuple[Effect, ...],
        now: int,
        task: Task,
    ) -> Job:
        """Enqueue the effects' tasks, then write `job`; checks due now run inline."""
        pending = list(effects)
        while pending:
            effect = pending.pop(0)
            if isinstance(effect, jobs.CheckConstraints):
                if effect.at_ms <= now:
                    job, more = jobs.recheck(job, self.context(job.schedule), now)
                    pending.extend(more)
                else:
                    self._enqueue(check_task(record.name, job.revision, job.key, effect.at_ms))
            elif isinstance(effect, jobs.TimeoutAt):
                self._enqueue(timeout_task(record.name, job.revision, effect.job_key, effect.at_ms))
            elif isinstance(effect, jobs.RecheckOnRunEnd):
                self.store.add_key(RUN_END_KEY + effect.program, record.name)
            elif isinstance(effect, jobs.Launch):
                self._enqueue(self.launch_request(record.schedule, job, effect, task).task())
            elif isinstance(effect, jobs.JobEnded):
                if effect.state is JobState.ABORTED:
                    metrics.CONSTRAINT_ABORTS.inc()
                logger.info("job %s ended %s: %s", effect.job_key, effect.state, effect.reason)
            else:
                logger.debug("%s", effect.reason)
        self._write_job(job)
        return job

    def launch_request(
        self, schedule: Schedule, job: Job, launch: jobs.Launch, task: Task
    ) -> LaunchRequest:
        """The request of `launch`: keyed by the job (one run per job however often it is
        decided), timed by the task that decided it (so the run's launch latency is measured
        from the event or fire that satisfied the trigger, and a launch decided again after a
        crash is the same task)."""
        arguments = launch.arguments
        system: dict[str, Any] = {
            "logical_time": from_epoch_ms(arguments.logical_start_time_ms).isoformat(),
            "schedule": schedule.name,
        }
        for name, value in arguments.as_runtime_args().items():
            if name not in arguments.properties:
                system[name] = value
        limits = [c.max_concurrency for c in schedule.constraints if isinstance(c, Concurrency)]
        return LaunchRequest(
            program=schedule.program,
            request_key=job.key,
            started_by=StartedBy(StarterKind.SCHEDULE, schedule.name),
            requested_at=task.scheduled_time,
            properties=dict(arguments.properties),
            system=system,
            concurrency=min(limits) if limits else None,
            reply_to=task.ordering_id,
            reply_executor=SCHEDULES_EXECUTOR,
        )

    def _enqueue(self, task: Task) -> None:
        self.client.schedule_task(task).result(self.timeout_s)

    def _write_job(self, job: Job) -> None:
        name = job.schedule.name
        stored = self.store.jobs(name)
        before = next((j.state for j in stored if j.key == job.key), None)
        trim = jobs.trim(stored, job)
        self.store.put_jobs(
            [job],
            delete=[(name, key) for key in trim.one_by_one],
            below=[(name, trim.below)] if trim.below else [],
        )
        jobs_moved(before, job.state)
        for old in trim.gone:
            jobs_moved(old.state, None)

    def _stop_waiting_if_idle(self, record: ScheduleRecord) -> None:
        waiting = any(j.state is JobState.PENDING_CONSTRAINT for j in self.store.jobs(record.name))
        if not waiting:
            self.store.remove_key(RUN_END_KEY + record.schedule.program, record.name)


def _finished(run: Any) -> FinishedRun:
    return FinishedRun(end_ms=run.ended_ms or run.created_ms, status=RunStatus(str(run.status)))


def _event(data: dict[str, Any]) -> Event:
    if data.get("kind") == "PARTITION":
        return PartitionsAdded.model_validate(data)
    if data.get("kind") == "PROGRAM_STATUS":
        return RunEnded.model_validate(data)
    raise TaskDataError(f"a schedule event must be PARTITION or PROGRAM_STATUS, got {data!r}")
