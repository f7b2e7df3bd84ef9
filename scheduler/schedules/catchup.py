"""Cron fires that no worker ran when they were due: which of them run now.

The engine enqueues each cron fire as a durable task. After an outage of the whole fleet (or a
schedule enabled long after its last fire) it asks `fires_to_run` which fires after the last one
it handled run now. A fire at most `LATE_MS` late is on time under every policy, like Quartz's
misfire threshold; older ones follow the schedule's `catchUp`:

* SKIP: none (the seeds' system: Quartz's "do nothing" misfire instruction);
* ONCE: the latest missed fire, once;
* ALL (the default): each missed fire, oldest first, back to the schedule's timeout - a fire
  older than that would have timed out as a job anyway - and at most `MAX_FIRES` of them.
"""

from __future__ import annotations

from scheduler.schedules.cron import Cron
from scheduler.schedules.model import CatchUp, Schedule

LATE_MS = 60_000
"""A fire this late or less is on time: it runs under every policy."""
MAX_FIRES = 10_000
"""ALL runs at most this many missed fires of one cron expression (the newest)."""


def _fires_between(cron: Cron, after_ms: int, until_ms: int, limit: int) -> list[int]:
    """The newest `limit` fires in (after_ms, until_ms], oldest first, found backwards so that a
    long outage of a frequent cron costs `limit` steps, not one per fire."""
    fires: list[int] = []
    cursor = until_ms + 1
    while len(fires) < limit:
        fire = cron.previous_before(cursor)
        if fire <= after_ms:
            break
        fires.append(fire)
        cursor = fire
    fires.reverse()
    return fires


def fires_to_run(schedule: Schedule, cron: Cron, last_fire_ms: int, now: int) -> list[int]:
    """The fires of `cron` (one of `schedule.crons()`) after `last_fire_ms`, the last fire the
    engine handled, that run at `now`, oldest first. The next fire to enqueue after them is
    `cron.next_after(now)`."""
    if schedule.catch_up is CatchUp.ONCE:
        return _fires_between(cron, last_fire_ms, now, 1)
    if schedule.catch_up is CatchUp.SKIP:
        return _fires_between(cron, max(last_fire_ms, now - LATE_MS - 1), now, MAX_FIRES)
    oldest = max(last_fire_ms, now - max(schedule.timeout_millis, LATE_MS) - 1)
    return _fires_between(cron, oldest, now, MAX_FIRES)
