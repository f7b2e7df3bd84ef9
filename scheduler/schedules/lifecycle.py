"""Lifecycle changes as the schedule's queue applies them (the `change` task).

The client (`client.py`) checks a request against the store and answers conflicts and unknown
names at once; the task applies it, and does nothing if it no longer applies (a request sent
twice, or raced by another client). The seeds' rules:

* create: the schedule starts disabled, at a new revision.
* update: delete-and-recreate: open jobs of the old revision become OBSOLETE, the schedule gets
  a new revision (tasks of the old one are no-ops from now on), and keeps its status.
* enable: fires are enqueued from now on (fires before enabling never run).
* disable / delete: open jobs become OBSOLETE (a job already launching keeps its launch).

A revision is the change request's time in ms, and always above the previous revision, so a
schedule deleted and created again never reuses a revision whose tasks may still be pending.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scheduler.schedules import job as jobs
from scheduler.schedules.abc import ScheduleRecord
from scheduler.schedules.fires import send_fire
from scheduler.schedules.job_gauge import jobs_moved
from scheduler.schedules.model import Schedule

if TYPE_CHECKING:
    from scheduler.model import Task
    from scheduler.schedules.executor import ScheduleExecutor

logger = logging.getLogger(__name__)


def apply_change(executor: ScheduleExecutor, name: str, task: Task) -> None:
    data = task.data
    action, change_id = str(data["action"]), str(data["change_id"])
    store = executor.store
    record = store.get(name)
    if record is not None and record.change_id == change_id:
        return  # applied already: the task ran again after a crash
    now = executor.clock()
    if action == "create":
        if record is not None:
            logger.info("schedule %s exists: create %s ignored", name, change_id)
            return
        schedule = Schedule.model_validate(data["schedule"])
        store.put(
            ScheduleRecord(
                schedule,
                revision=task.scheduled_ms,
                created_ms=now,
                updated_ms=now,
                change_id=change_id,
                source=str(data.get("source") or ""),
            )
        )
        return
    if record is None:
        logger.info("schedule %s does not exist: %s %s ignored", name, action, change_id)
        return
    if action == "update":
        _discard(executor, record, "the schedule was updated")
        updated = ScheduleRecord(
            Schedule.model_validate(data["schedule"]),
            revision=max(record.revision + 1, task.scheduled_ms),
            enabled=record.enabled,
            created_ms=record.created_ms,
            updated_ms=now,
            disabled_ms=record.disabled_ms,
            change_id=change_id,
            source=str(data.get("source", record.source) or ""),
        )
        if updated.enabled:
            updated = _start_fires(executor, updated, now)
        store.put(updated)
    elif action == "enable":
        if record.enabled:
            return
        enabled = record.changed(enabled=True, updated_ms=now, change_id=change_id)
        store.put(_start_fires(executor, enabled, now))
    elif action == "disable":
        if not record.enabled:
            return
        _discard(executor, record, "the schedule was disabled")
        store.put(
            record.changed(
                enabled=False, updated_ms=now, disabled_ms=now, change_id=change_id, next_fires={}
            )
        )
    elif action == "delete":
        _discard(executor, record, "the schedule was deleted")
        store.remove_key("run-end:" + record.schedule.program, name)
        stored = store.jobs(name)
        store.delete(name)
        for job in stored:
            jobs_moved(job.state, None)
    else:
        raise ValueError(f"unknown schedule change {action!r}")


def _start_fires(executor: ScheduleExecutor, record: ScheduleRecord, now: int) -> ScheduleRecord:
    """Enqueue the next fire of each cron of `record` (before the record is written)."""
    last: dict[str, int] = {}
    following: dict[str, int] = {}
    for index, cron in enumerate(record.schedule.crons()):
        fire = cron.next_after(now)
        send_fire(executor, record, index, fire).result(executor.timeout_s)
        last[str(index)] = now
        following[str(index)] = fire
    return record.changed(last_fires=last, next_fires=following)


def _discard(executor: ScheduleExecutor, record: ScheduleRecord, reason: str) -> None:
    for job in executor.store.jobs(record.name):
        ended, effects = jobs.discard(job, reason)
        if effects:
            executor.store.put_job(ended)
            jobs_moved(job.state, ended.state)
