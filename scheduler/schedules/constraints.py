"""Run constraints, checked as pure functions of the schedule, the job's first event, what is known
about the program's runs, and `now`.

A check ends in one of three verdicts: Met, Wait (with the exact instant at which the verdict can
change, and/or "when a run of the program ends"), or Abort. A constraint that is not met waits or
aborts as its `wait_until_met` says; the defaults are the seeds' (concurrency and last-run abort,
delay and time window wait). Over all of a schedule's constraints, as the seeds' system does: any
Abort aborts; otherwise any Wait waits; otherwise Met.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta

from scheduler.model import from_epoch_ms, to_epoch_ms
from scheduler.schedules.cron import instant_to_wall, wall_to_instant_ms, zone
from scheduler.schedules.model import (
    Concurrency,
    Constraint,
    Delay,
    LastRun,
    RunStatus,
    Schedule,
    TimeRange,
)


@dataclass(frozen=True)
class FinishedRun:
    """A run of the program that reached a final status."""

    end_ms: int
    """When it ended (epoch ms)."""
    status: RunStatus


@dataclass(frozen=True)
class ConstraintContext:
    """What the engine knows about the schedule's program when it checks a job."""

    active_runs: int = 0
    """Runs of the program that have not ended (pending or running), whoever started them."""
    last_run: FinishedRun | None = None
    """The program's most recently ended run, whatever its status."""
    last_completed: FinishedRun | None = None
    """The program's most recently ended run whose status is COMPLETED."""


@dataclass(frozen=True)
class Met:
    """Every constraint is met: the job may launch now."""


@dataclass(frozen=True)
class Wait:
    """Some constraint is not met yet. Check again at `until_ms` (when it is not None) and, when
    `on_run_end`, as soon as a run of the program ends; no earlier check can find it met."""

    until_ms: int | None
    on_run_end: bool
    reason: str


@dataclass(frozen=True)
class Abort:
    """A constraint that is not met and does not wait: the job is dropped."""

    reason: str


Verdict = Met | Wait | Abort


def _not_met(
    constraint: Constraint, reason: str, until_ms: int | None, on_run_end: bool
) -> Verdict:
    if constraint.wait_until_met:
        return Wait(until_ms=until_ms, on_run_end=on_run_end, reason=reason)
    return Abort(reason=reason)


def _iso(instant_ms: int) -> str:
    return from_epoch_ms(instant_ms).isoformat(timespec="milliseconds")


def _concurrency(rule: Concurrency, program: str, context: ConstraintContext) -> Verdict:
    if context.active_runs < rule.max_concurrency:
        return Met()
    reason = (
        f"{context.active_runs} run(s) of program {program!r} active, "
        f"at most {rule.max_concurrency} allowed"
    )
    return _not_met(rule, reason, None, on_run_end=True)


def _delay(rule: Delay, first_event_ms: int, now: int) -> Verdict:
    due = first_event_ms + rule.millis
    if now >= due:
        return Met()
    return Wait(until_ms=due, on_run_end=False, reason=f"delayed until {_iso(due)}")


def _window_opens(rule: TimeRange, default_zone: str, now: int) -> int | None:
    """None when `now` is inside the window, else the instant it next opens."""
    tz = zone(rule.time_zone or default_zone)
    local = instant_to_wall(now, tz)
    minute = local.hour * 60 + local.minute
    start, end = rule.start_minute, rule.end_minute
    inside = start <= minute < end if start < end else (minute >= start or minute < end)
    if inside:
        return None
    day = local.date() + timedelta(days=1 if start < end <= minute else 0)
    for _ in range(3):
        wall = datetime.combine(day, time(start // 60, start % 60))
        # The first occurrence of a repeated wall time may lie behind us; the second counts too.
        for opens in (wall_to_instant_ms(wall, tz), to_epoch_ms(wall.replace(tzinfo=tz, fold=1))):
            if opens > now:
                return opens
        day += timedelta(days=1)
    raise AssertionError(f"no opening of {rule.start}-{rule.end} after {_iso(now)}")


def _time_range(rule: TimeRange, default_zone: str, now: int) -> Verdict:
    opens = _window_opens(rule, default_zone, now)
    if opens is None:
        return Met()
    where = rule.time_zone or default_zone
    reason = f"outside the window {rule.start}-{rule.end} ({where}); it opens at {_iso(opens)}"
    return _not_met(rule, reason, opens, on_run_end=False)


def _last_run(rule: LastRun, program: str, context: ConstraintContext, now: int) -> Verdict:
    if context.active_runs > 0:
        reason = f"a run of program {program!r} is active"
        return _not_met(rule, reason, None, on_run_end=True)
    ends = [
        run.end_ms
        for run in (context.last_completed, context.last_run)
        if run is not None and run.status is RunStatus.COMPLETED
    ]
    if not ends:
        return Met()
    due = max(ends) + rule.millis
    if now >= due:
        return Met()
    reason = (
        f"the last completed run of program {program!r} ended at {_iso(max(ends))}, "
        f"less than {rule.millis} ms ago"
    )
    return _not_met(rule, reason, due, on_run_end=False)


def check_one(
    rule: Constraint, schedule: Schedule, first_event_ms: int, context: ConstraintContext, now: int
) -> Verdict:
    """The verdict of one constraint of `schedule` for a job whose first event came at
    `first_event_ms`."""
    if isinstance(rule, Concurrency):
        return _concurrency(rule, schedule.program, context)
    if isinstance(rule, Delay):
        return _delay(rule, first_event_ms, now)
    if isinstance(rule, TimeRange):
        return _time_range(rule, schedule.time_zone, now)
    return _last_run(rule, schedule.program, context, now)


def check_all(
    schedule: Schedule, first_event_ms: int, context: ConstraintContext, now: int
) -> Verdict:
    """The verdict over all of `schedule`'s constraints."""
    waits: list[Wait] = []
    for rule in schedule.constraints:
        verdict = check_one(rule, schedule, first_event_ms, context, now)
        if isinstance(verdict, Abort):
            return verdict
        if isinstance(verdict, Wait):
            waits.append(verdict)
    if not waits:
        return Met()
    # Each timed wait is unmet until its instant, so none is met before the latest of them.
    instants = [wait.until_ms for wait in waits if wait.until_ms is not None]
    return Wait(
        until_ms=max(instants) if instants else None,
        on_run_end=any(wait.on_run_end for wait in waits),
        reason="; ".join(wait.reason for wait in waits),
    )
