"""The engine tasks of a schedule's queue (ordering id `schedule:<name>`), and their keys.

Every change to a schedule's state is one of these tasks, so the engine's per-ordering-id order
makes each schedule single-writer. Keys are derived from what causes the task, so a producer
that sends one twice, or a task that re-runs after a crash and enqueues its follow-ups again,
makes the same keys, which the engine runs once:

| op | time | uniqueness key |
| --- | --- | --- |
| change (create, update, enable, disable, delete) | the request's | `change:<request id>` |
| fire | the fire's instant | `fire:<revision>:<cron index>` |
| event (partitions landed, a run ended) | the event record's | its `topic/partition/offset` |
| check (a constraint re-check) | the instant a Wait named | `check:<job key>` |
| timeout | the job's deadline | `timeout:<job key>` |
| launch-refused (the program queue's answer) | the launch's | `launch-refused:<job key>` |
"""

from __future__ import annotations

from typing import Any

from scheduler.model import Task, from_epoch_ms

SCHEDULES_EXECUTOR = "schedules"
"""The executor route of every task in a schedule's queue."""
SCHEDULE_QUEUE = "schedule:"


def queue(name: str) -> str:
    return SCHEDULE_QUEUE + name


def change_task(name: str, at_ms: int, change_id: str, action: str, **data: Any) -> Task:
    """A lifecycle change (`create`, `update`, `enable`, `disable`, `delete`)."""
    return Task(
        queue(name),
        from_epoch_ms(at_ms),
        f"change:{change_id}",
        {
            "executor": SCHEDULES_EXECUTOR,
            "op": "change",
            "action": action,
            "change_id": change_id,
            **data,
        },
    )


def fire_task(name: str, revision: int, cron_index: int, fire_ms: int) -> Task:
    """The fire of cron `cron_index` of the schedule's revision at `fire_ms`."""
    return Task(
        queue(name),
        from_epoch_ms(fire_ms),
        f"fire:{revision}:{cron_index}",
        {"executor": SCHEDULES_EXECUTOR, "op": "fire", "revision": revision, "cron": cron_index},
    )


def check_task(name: str, revision: int, job_key: str, at_ms: int) -> Task:
    return Task(
        queue(name),
        from_epoch_ms(at_ms),
        f"check:{job_key}",
        {"executor": SCHEDULES_EXECUTOR, "op": "check", "revision": revision, "job": job_key},
    )


def timeout_task(name: str, revision: int, job_key: str, at_ms: int) -> Task:
    return Task(
        queue(name),
        from_epoch_ms(at_ms),
        f"timeout:{job_key}",
        {"executor": SCHEDULES_EXECUTOR, "op": "timeout", "revision": revision, "job": job_key},
    )
