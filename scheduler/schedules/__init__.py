"""Schedules: cron, data-arrival, program-status and composite triggers with run constraints.

This package is the engine-independent core: the model and its JSON shape (`model`, `parse`),
cron in a time zone (`cron`), constraint checks (`constraints`) and the pending job as a pure
state machine (`job`). The engine carries out the job's effects as durable tasks of the
schedule's ordering queue, ``schedule:<name>``. See docs/schedules.md.
"""

from scheduler.schedules.catchup import fires_to_run
from scheduler.schedules.constraints import (
    Abort,
    ConstraintContext,
    FinishedRun,
    Met,
    Verdict,
    Wait,
)
from scheduler.schedules.cron import Cron, parse_cron
from scheduler.schedules.errors import CronError, JobStateError, ScheduleError
from scheduler.schedules.events import (
    Event,
    PartitionsAdded,
    RunEnded,
    TimeFired,
    time_fired,
)
from scheduler.schedules.job import (
    CheckConstraints,
    Effect,
    EventIgnored,
    Job,
    JobEnded,
    JobState,
    Launch,
    RecheckOnRunEnd,
    RunArguments,
    TimeoutAt,
    TriggeringRun,
    add_event,
    check_constraints,
    discard,
    expire,
    new_job,
    recheck,
)
from scheduler.schedules.model import (
    And,
    CatchUp,
    Concurrency,
    Constraint,
    Delay,
    LastRun,
    Or,
    Partition,
    ProgramStatus,
    RunStatus,
    Schedule,
    Time,
    TimeRange,
    Trigger,
)
from scheduler.schedules.parse import parse_schedule

__all__ = [
    "Abort",
    "And",
    "CatchUp",
    "CheckConstraints",
    "Concurrency",
    "Constraint",
    "ConstraintContext",
    "Cron",
    "CronError",
    "Delay",
    "Effect",
    "Event",
    "EventIgnored",
    "FinishedRun",
    "Job",
    "JobEnded",
    "JobState",
    "JobStateError",
    "LastRun",
    "Launch",
    "Met",
    "Or",
    "Partition",
    "PartitionsAdded",
    "ProgramStatus",
    "RecheckOnRunEnd",
    "RunArguments",
    "RunEnded",
    "RunStatus",
    "Schedule",
    "ScheduleError",
    "Time",
    "TimeFired",
    "TimeRange",
    "TimeoutAt",
    "Trigger",
    "TriggeringRun",
    "Verdict",
    "Wait",
    "add_event",
    "check_constraints",
    "discard",
    "expire",
    "fires_to_run",
    "new_job",
    "parse_cron",
    "parse_schedule",
    "recheck",
    "time_fired",
]
