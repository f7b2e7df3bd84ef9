"""The pending job of a schedule, as a pure state machine.

A job collects the events that concern its schedule's trigger. Its states::

    PENDING_TRIGGER --trigger satisfied--> PENDING_CONSTRAINT --constraints met--> PENDING_LAUNCH
          |                                    |            \\
          +--timeout / discard--> TIMED_OUT / OBSOLETE       +--a constraint aborts--> ABORTED

Nothing here reads a clock, sleeps or starts a thread: every function takes `now` (epoch ms) and
returns the new job with the effects the engine must carry out as durable tasks of the schedule's
ordering queue (a constraint re-check at an instant, the job's timeout, the launch). As the seeds'
system ships it, a schedule has at most one PENDING_TRIGGER job; events arriving once it has moved
on start the next generation, so a job waiting for its constraints never swallows a later fire.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from scheduler.programs.model import run_id_for
from scheduler.schedules.constraints import ConstraintContext, Met, Verdict, Wait, check_all
from scheduler.schedules.errors import JobStateError
from scheduler.schedules.events import (
    Event,
    RunEnded,
    TimeFired,
    concerns,
    counted,
    is_satisfied,
    matches,
)
from scheduler.schedules.model import (
    TRIGGERING_PROPERTIES_MAPPING,
    Partition,
    ProgramStatus,
    RunStatus,
    Schedule,
    leaves,
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class JobState(enum.StrEnum):
    """Where a job stands; the last three are final and launch nothing."""

    PENDING_TRIGGER = "PENDING_TRIGGER"
    PENDING_CONSTRAINT = "PENDING_CONSTRAINT"
    PENDING_LAUNCH = "PENDING_LAUNCH"
    ABORTED = "ABORTED"
    TIMED_OUT = "TIMED_OUT"
    OBSOLETE = "OBSOLETE"


OPEN_STATES = frozenset({JobState.PENDING_TRIGGER, JobState.PENDING_CONSTRAINT})

KEEP_ENDED_JOBS = 5
"""Ended jobs kept per schedule for `schedules jobs` (older ones are deleted)."""


class Job(_Frozen):
    """One pending job of a schedule; serialisable as JSON (`model_dump_json`)."""

    schedule: Schedule
    revision: int
    """Which version of the schedule this job belongs to; the engine gives each create or update
    a new one, so that keys of jobs of a recreated schedule never repeat older ones."""
    generation: int = 0
    state: JobState = JobState.PENDING_TRIGGER
    events: tuple[Event, ...] = ()
    first_event_ms: int | None = None
    """When the first event was added: the timeout and the delay count from here."""
    reason: str | None = None
    """Why the job ended, for ABORTED, TIMED_OUT and OBSOLETE."""

    @property
    def key(self) -> str:
        """The job's identity, unique per schedule version and generation; the engine derives
        the launch task's key from it, so a launch decided twice runs once."""
        return f"schedule:{self.schedule.name}:{self.revision}:{self.generation}"

    @property
    def run_id(self) -> str | None:
        """The run a launched job (PENDING_LAUNCH) asked for, else None. Its id is derived from
        the job's key (the launch's request key), so it names the run even before the program's
        queue has created it."""
        if self.state is not JobState.PENDING_LAUNCH:
            return None
        return run_id_for(self.schedule.program, self.key)

    @property
    def deadline_ms(self) -> int | None:
        """The instant the job times out unless it reached PENDING_LAUNCH."""
        if self.first_event_ms is None:
            return None
        return self.first_event_ms + self.schedule.timeout_millis


def job_order(job: Job) -> tuple[int, int]:
    """Where a job sorts among its schedule's: oldest first (revision, then generation)."""
    return (job.revision, job.generation)


def key_order(job_key: str) -> tuple[int, int]:
    """`job_order` of the job with key `job_key` (`schedule:<name>:<revision>:<generation>`)."""
    revision, generation = job_key.rsplit(":", 2)[1:]
    return (int(revision), int(generation))


@dataclass(frozen=True)
class Trim:
    """The ended jobs a schedule stops keeping once a job is written (`trim`), and how the
    store forgets them: every job before `below` at once (one range delete on Cassandra, which
    leaves one tombstone however many rows it covers) and `one_by_one` the rest."""

    gone: tuple[Job, ...] = ()
    below: str | None = None
    """The key of the oldest job kept, when some gone jobs are older than it."""
    one_by_one: tuple[str, ...] = ()
    """Keys of gone jobs newer than the oldest kept one (an old job still open keeps them)."""


def trim(history: Sequence[Job], written: Job) -> Trim:
    """What to forget of `history` (a schedule's stored jobs, oldest first) when `written` is
    written: the ended jobs beyond the newest `KEEP_ENDED_JOBS`. A schedule that fires every
    second would otherwise leave a row tombstone per fire where its jobs are read, which
    Cassandra counts for ten days; the range delete leaves one."""
    ended = [j for j in history if j.state not in OPEN_STATES and j.key != written.key]
    gone = ended[:-KEEP_ENDED_JOBS]
    if not gone:
        return Trim()
    gone_keys = {j.key for j in gone}
    floor = min(
        [j for j in history if j.key not in gone_keys and j.key != written.key] + [written],
        key=job_order,
    )
    older = any(job_order(j) < job_order(floor) for j in gone)
    return Trim(
        gone=tuple(gone),
        below=floor.key if older else None,
        one_by_one=tuple(j.key for j in gone if job_order(j) > job_order(floor)),
    )


def new_job(schedule: Schedule, revision: int, generation: int = 0) -> Job:
    """A schedule's empty job, waiting for its first event."""
    return Job(schedule=schedule, revision=revision, generation=generation)


@dataclass(frozen=True)
class TriggeringRun:
    """The run whose end satisfied a PROGRAM_STATUS trigger."""

    program: str
    run_id: str
    status: RunStatus
    properties: Mapping[str, str]


@dataclass(frozen=True)
class RunArguments:
    """What a launched run is given: the schedule's properties and the system arguments."""

    schedule_name: str
    logical_start_time_ms: int
    """The cron fire time for a TIME-triggered job, else the instant the launch was decided."""
    properties: Mapping[str, str]
    """The schedule's properties, then the ones mapped from the triggering run."""
    triggering_runs: tuple[TriggeringRun, ...] = ()
    partitions: tuple[tuple[str, int], ...] = ()
    """(dataset, partitions counted) for each PARTITION trigger, in the order written."""

    def as_runtime_args(self) -> dict[str, str]:
        """The arguments as one flat string map, the way a program receives them."""
        args = dict(self.properties)
        args["logicalStartTime"] = str(self.logical_start_time_ms)
        args["schedule.name"] = self.schedule_name
        if self.triggering_runs:
            first = self.triggering_runs[0]
            args["triggering.program"] = first.program
            args["triggering.run.id"] = first.run_id
            args["triggering.run.status"] = first.status.value
            runs = [
                {
                    "program": r.program,
                    "runId": r.run_id,
                    "status": r.status.value,
                    "properties": dict(r.properties),
                }
                for r in self.triggering_runs
            ]
            args["triggering.runs"] = json.dumps(runs)
        if self.partitions:
            landed = [{"dataset": dataset, "count": count} for dataset, count in self.partitions]
            args["triggering.partitions"] = json.dumps(landed)
        return args


@dataclass(frozen=True)
class CheckConstraints:
    """Call `recheck` on the job at `at_ms` (now, or the instant a Wait named)."""

    job_key: str
    at_ms: int


@dataclass(frozen=True)
class RecheckOnRunEnd:
    """Call `recheck` on the job as soon as a run of `program` ends."""

    job_key: str
    program: str


@dataclass(frozen=True)
class TimeoutAt:
    """Call `expire` on the job at `at_ms`."""

    job_key: str
    at_ms: int


@dataclass(frozen=True)
class Launch:
    """Start a run of the schedule's program with these arguments, once per `job_key`."""

    job_key: str
    program: str
    arguments: RunArguments


@dataclass(frozen=True)
class JobEnded:
    """The job ended without a launch (aborted, timed out, made obsolete)."""

    job_key: str
    state: JobState
    reason: str


@dataclass(frozen=True)
class EventIgnored:
    """The event changed nothing."""

    reason: str


Effect = CheckConstraints | RecheckOnRunEnd | TimeoutAt | Launch | JobEnded | EventIgnored


def run_arguments(job: Job, now: int) -> RunArguments:
    """The arguments of the run `job` launches, decided at `now`."""
    schedule = job.schedule
    zone = schedule.time_zone
    triggers = list(leaves(schedule.trigger))
    fires = [
        event.logical_time_ms
        for event in job.events
        if isinstance(event, TimeFired) and any(matches(leaf, event, zone) for leaf in triggers)
    ]
    partitions = [
        (leaf.dataset, sum(e.count for e in counted(leaf, job.events, zone)))
        for leaf in triggers
        if isinstance(leaf, Partition)
    ]
    runs: list[TriggeringRun] = []
    for leaf in triggers:
        if not isinstance(leaf, ProgramStatus):
            continue
        ended = [e for e in job.events if isinstance(e, RunEnded) and matches(leaf, e, zone)]
        if ended and all(run.run_id != ended[0].run_id for run in runs):
            first = ended[0]
            runs.append(TriggeringRun(first.program, first.run_id, first.status, first.properties))
    properties = {
        k: v for k, v in schedule.properties.items() if k != TRIGGERING_PROPERTIES_MAPPING
    }
    for target, source in schedule.properties_mapping().items():
        for run in runs:
            if source in run.properties:
                properties[target] = run.properties[source]
                break
    return RunArguments(
        schedule_name=schedule.name,
        logical_start_time_ms=fires[0] if fires else now,
        properties=properties,
        triggering_runs=tuple(runs),
        partitions=tuple(partitions),
    )


def _end(job: Job, state: JobState, reason: str) -> tuple[Job, tuple[Effect, ...]]:
    ended = job.model_copy(update={"state": state, "reason": reason})
    return ended, (JobEnded(job.key, state, reason),)


def _launch(job: Job, now: int) -> tuple[Job, tuple[Effect, ...]]:
    launching = job.model_copy(update={"state": JobState.PENDING_LAUNCH})
    return launching, (Launch(job.key, job.schedule.program, run_arguments(job, now)),)


def _timed_out(job: Job, now: int) -> bool:
    deadline = job.deadline_ms
    return job.state in OPEN_STATES and deadline is not None and now >= deadline


def _timeout_reason(job: Job) -> str:
    return f"not launched within {job.schedule.timeout_millis} ms of its first event"


def add_event(job: Job, event: Event, now: int) -> tuple[Job, tuple[Effect, ...]]:
    """Add `event` to the schedule's latest job `job`. Returns the job that took it (the next
    generation when `job` has left PENDING_TRIGGER) and the effects to carry out."""
    schedule = job.schedule
    if job.state is JobState.OBSOLETE:
        return job, (EventIgnored(f"schedule {schedule.name!r} was disabled, updated or deleted"),)
    if not concerns(schedule, event):
        reason = f"no trigger of schedule {schedule.name!r} counts this {event.kind} event"
        return job, (EventIgnored(reason),)
    if event.identity is not None and any(e.identity == event.identity for e in job.events):
        # A task re-run after a crash delivers its event again; counting it twice would launch
        # twice (a fire that already launched would start the next generation).
        return job, (EventIgnored(f"job {job.key} already counted this {event.kind} event"),)
    effects: list[Effect] = []
    if job.state is JobState.PENDING_TRIGGER and _timed_out(job, now):
        job, ended = _end(job, JobState.TIMED_OUT, _timeout_reason(job))
        effects.extend(ended)
    if job.state is not JobState.PENDING_TRIGGER:
        job = new_job(schedule, job.revision, job.generation + 1)
    update: dict[str, object] = {"events": (*job.events, event)}
    if job.first_event_ms is None:
        update["first_event_ms"] = now
        effects.append(TimeoutAt(job.key, now + schedule.timeout_millis))
    job = job.model_copy(update=update)
    if not is_satisfied(schedule.trigger, job.events, schedule.time_zone):
        return job, tuple(effects)
    if not schedule.constraints:
        job, launched = _launch(job, now)
        return job, (*effects, *launched)
    job = job.model_copy(update={"state": JobState.PENDING_CONSTRAINT})
    return job, (*effects, CheckConstraints(job.key, now))


def check_constraints(job: Job, context: ConstraintContext, now: int) -> Verdict:
    """The verdict of the job's constraints at `now`: Met, Wait(until_ms, ...) or Abort."""
    if job.first_event_ms is None:
        raise JobStateError(f"job {job.key} has no event; its constraints cannot be checked")
    return check_all(job.schedule, job.first_event_ms, context, now)


def recheck(job: Job, context: ConstraintContext, now: int) -> tuple[Job, tuple[Effect, ...]]:
    """Check a PENDING_CONSTRAINT job's constraints and act on the verdict. A re-check that
    finds the job in another state (it launched, ended or timed out meanwhile) does nothing."""
    if job.state is not JobState.PENDING_CONSTRAINT:
        return job, ()
    if _timed_out(job, now):
        return _end(job, JobState.TIMED_OUT, _timeout_reason(job))
    verdict = check_constraints(job, context, now)
    if isinstance(verdict, Met):
        return _launch(job, now)
    if not isinstance(verdict, Wait):
        return _end(job, JobState.ABORTED, verdict.reason)
    effects: list[Effect] = []
    deadline = job.deadline_ms
    if verdict.until_ms is not None and (deadline is None or verdict.until_ms < deadline):
        effects.append(CheckConstraints(job.key, verdict.until_ms))
    if verdict.on_run_end:
        effects.append(RecheckOnRunEnd(job.key, job.schedule.program))
    return job, tuple(effects)


def expire(job: Job, now: int) -> tuple[Job, tuple[Effect, ...]]:
    """The job's timeout task: end the job unless it launched or ended already."""
    if not _timed_out(job, now):
        return job, ()
    return _end(job, JobState.TIMED_OUT, _timeout_reason(job))


def discard(job: Job, reason: str) -> tuple[Job, tuple[Effect, ...]]:
    """Disabling, updating or deleting the schedule: an open job becomes OBSOLETE. A job already
    PENDING_LAUNCH keeps its launch, as in the seeds' system."""
    if job.state not in OPEN_STATES:
        return job, ()
    return _end(job, JobState.OBSOLETE, reason)
