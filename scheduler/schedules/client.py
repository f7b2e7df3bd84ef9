"""The schedules client: the lifecycle of schedules for Python code and the CLI.

    from scheduler import Schedule, Time, SchedulesClient

    schedules.create(Schedule(name="hourly", program="clean", trigger=Time(cron="5 * * * *")))
    schedules.enable("hourly")

Reads go to the schedule store. Every change is a task in the schedule's queue
(`schedule:<name>`, see `tasks.py`) that a worker applies; the client checks the request first
(unknown names, conflicts, unknown programs: nothing is sent then), sends the tasks, and by
default waits until the store shows them applied. A batch (create, delete) is checked as a
whole before any task is sent: all or nothing.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.applying import ApplyWait
from scheduler.client import SchedulerClient
from scheduler.engine.clock import now_ms
from scheduler.programs.catalog import ProgramCatalog
from scheduler.schedules.abc import ScheduleRecord, ScheduleStore, event_keys
from scheduler.schedules.errors import (
    ScheduleConflictError,
    ScheduleError,
    ScheduleNotAppliedError,
    ScheduleNotFoundError,
)
from scheduler.schedules.job import Job
from scheduler.schedules.model import Schedule
from scheduler.schedules.parse import parse_schedule
from scheduler.schedules.tasks import change_task

logger = logging.getLogger(__name__)

_PAGE = 500


@dataclass(frozen=True)
class ApplyResult:
    """What `apply` did, by schedule name."""

    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()


class SchedulesClient:
    """Create, change and read schedules of one deployment."""

    def __init__(
        self,
        *,
        store: ScheduleStore,
        client: SchedulerClient | None,
        catalog: ProgramCatalog | None = None,
        clock: Callable[[], int] = now_ms,
        wait_s: float | None = 30.0,
        poll_s: float = 0.05,
    ) -> None:
        self.store = store
        self.client = client
        """Sends the changes; None for a client that only reads."""
        self.catalog = catalog
        """Programs a schedule may name; None accepts any (the worker refuses unknown ones)."""
        self.clock = clock
        self.wait_s = wait_s
        """How long a change waits to be applied by a worker; None: do not wait."""
        self.poll_s = poll_s

    # -- reads ----------------------------------------------------------------------------------

    def get(self, name: str) -> ScheduleRecord:
        record = self.store.get(name)
        if record is None:
            raise ScheduleNotFoundError(
                f"no schedule {name!r}; `scheduler schedules list` shows the schedules there are"
            )
        return record

    def list_schedules(
        self,
        *,
        trigger_type: str | None = None,
        status: str | None = None,
        after: str = "",
        limit: int = 100,
    ) -> list[ScheduleRecord]:
        return self.store.list_schedules(
            trigger_type=trigger_type, status=status, after=after, limit=limit
        )

    def all(
        self, *, trigger_type: str | None = None, status: str | None = None
    ) -> Iterable[ScheduleRecord]:
        """Every schedule (of the type and status), page by page."""
        after = ""
        while True:
            page = self.list_schedules(
                trigger_type=trigger_type, status=status, after=after, limit=_PAGE
            )
            yield from page
            if len(page) < _PAGE:
                return
            after = page[-1].name

    def jobs(self, name: str) -> list[Job]:
        self.get(name)
        return self.store.jobs(name)

    def triggered_by(self, program: str) -> list[ScheduleRecord]:
        """The schedules a run of `program` triggers (PROGRAM_STATUS triggers on it)."""
        key = f"program:{program}"
        found = (self.store.get(n) for n in self.store.names_for_key(key))
        # The index may name a schedule whose trigger no longer counts the program (a deleted
        # row that came back): the record is the truth.
        return [r for r in found if r is not None and key in event_keys(r.schedule)]

    def next_runs(self, name: str, count: int = 5, *, after_ms: int | None = None) -> list[int]:
        """The next `count` fire times of the schedule's cron triggers (epoch ms)."""
        schedule = self.get(name).schedule
        cursor = self.clock() if after_ms is None else after_ms
        fires: list[int] = []
        while len(fires) < count:
            fire = schedule.next_fire_after(cursor)
            if fire is None:
                break
            fires.append(fire)
            cursor = fire
        return fires

    def previous_runs(
        self, name: str, count: int = 5, *, before_ms: int | None = None
    ) -> list[int]:
        """The last `count` fire times before now (or `before_ms`), newest first."""
        schedule = self.get(name).schedule
        cursor = self.clock() if before_ms is None else before_ms
        fires: list[int] = []
        while len(fires) < count:
            fire = schedule.previous_fire_before(cursor)
            if fire is None:
                break
            fires.append(fire)
            cursor = fire
        return fires

    # -- changes --------------------------------------------------------------------------------

    def create(self, schedules: Schedule | Iterable[Schedule], *, source: str = "") -> None:
        """Create the schedules, disabled; any existing name, duplicate or unknown program
        creates none of them."""
        batch = [schedules] if isinstance(schedules, Schedule) else list(schedules)
        names = [s.name for s in batch]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ScheduleError(f"the batch names {twice} more than once; none was created")
        exist = [n for n in names if self.store.get(n) is not None]
        if exist:
            raise ScheduleConflictError(
                f"schedule(s) {exist} exist already; none was created (update them instead)"
            )
        for schedule in batch:
            self._check_program(schedule)
        self._send(
            [(s.name, "create", {"schedule": s.to_json(), "source": source}, False) for s in batch]
        )

    def update(self, name: str, changes: Mapping[str, Any] | Schedule) -> Schedule:
        """Change some fields (omitted ones keep their value; the program cannot change):
        delete-and-recreate semantics, a new revision. Returns the new definition."""
        record = self.get(name)
        if isinstance(changes, Schedule):
            merged = changes
        else:
            body = {**record.schedule.to_json(), **dict(changes), "name": name}
            merged = parse_schedule(body)
        if merged.name != name:
            raise ScheduleError(f"an update cannot rename schedule {name!r} to {merged.name!r}")
        if merged.program != record.schedule.program:
            raise ScheduleError(
                f"schedule {name!r} runs program {record.schedule.program!r}; its program cannot "
                f"change to {merged.program!r}: delete it and create another"
            )
        self._send([(name, "update", {"schedule": merged.to_json()}, False)])
        return merged

    def enable(self, name: str) -> None:
        if self.get(name).enabled:
            raise ScheduleConflictError(f"schedule {name!r} is enabled already")
        self._send([(name, "enable", {}, False)])

    def disable(self, name: str) -> None:
        if not self.get(name).enabled:
            raise ScheduleConflictError(f"schedule {name!r} is disabled already")
        self._send([(name, "disable", {}, False)])

    def delete(self, names: str | Sequence[str]) -> None:
        """Delete the schedules; a batch with any unknown name deletes nothing."""
        batch = [names] if isinstance(names, str) else list(names)
        unknown = [n for n in batch if self.store.get(n) is None]
        if unknown:
            raise ScheduleNotFoundError(f"no schedule(s) {unknown}; none was deleted")
        self._send([(n, "delete", {}, True) for n in batch])

    def reenable(self, start_ms: int, end_ms: int) -> list[str]:
        """Enable the schedules disabled within [start_ms, end_ms); returns their names."""
        names = [
            r.name
            for r in self.all(status="DISABLED")
            if r.disabled_ms is not None and start_ms <= r.disabled_ms < end_ms
        ]
        self._send([(n, "enable", {}, False) for n in names])
        return names

    def apply(
        self, schedules: Iterable[Schedule], *, source: str, update_schedules: bool = True
    ) -> ApplyResult:
        """Make the schedules declared by `source` (a file) those given, as a redeploy does
        with the seeds' `app.deploy.update.schedules`: when true, create the new ones
        (disabled), update the changed ones and delete those `source` declared before and no
        longer does; when false, create and change nothing, and delete only the schedules
        `source` declared whose program no longer exists."""
        wanted = {s.name: s for s in schedules}
        ours = {r.name: r for r in self.all() if r.source == source}
        created, updated, unchanged = [], [], []
        for name, schedule in wanted.items():
            stored = self.store.get(name)
            if stored is None:
                created.append(schedule)
            elif stored.source != source:
                by = f"by {stored.source!r}" if stored.source else "by hand (create or the API)"
                raise ScheduleConflictError(
                    f"schedule {name!r} exists and was not declared by {source!r} but {by}; "
                    "apply with that source, rename the schedule in the file, or delete the "
                    "existing one"
                )
            elif not update_schedules or stored.schedule == schedule:
                unchanged.append(name)
            else:
                updated.append(schedule)
        deleted = sorted(set(ours) - set(wanted))
        if not update_schedules:
            # Nothing is created or changed; only schedules whose program is gone are deleted.
            created, updated = [], []
            deleted = [n for n in sorted(ours) if not self._program_known(ours[n].schedule)]
        for schedule in created + updated:
            self._check_program(schedule)
        sends = [
            (s.name, "create", {"schedule": s.to_json(), "source": source}, False) for s in created
        ]
        sends += [(s.name, "update", {"schedule": s.to_json()}, False) for s in updated]
        sends += [(n, "delete", {}, True) for n in deleted]
        self._send(sends)
        return ApplyResult(
            tuple(s.name for s in created),
            tuple(s.name for s in updated),
            tuple(deleted),
            tuple(unchanged),
        )

    # -- sending --------------------------------------------------------------------------------

    def _program_known(self, schedule: Schedule) -> bool:
        return self.catalog is None or schedule.program in self.catalog.names()

    def _check_program(self, schedule: Schedule) -> None:
        if self.catalog is not None:
            self.catalog.get(schedule.program)  # UnknownProgramError names the known ones

    def _send(self, changes: Sequence[tuple[str, str, dict[str, Any], bool]]) -> None:
        if self.client is None:
            raise RuntimeError("this schedules client only reads; give it a SchedulerClient")
        if not changes:
            return
        now = self.clock()
        sent: list[tuple[str, str, bool]] = []
        futures = []
        for name, action, data, gone in changes:
            # Changes due in one millisecond run in key order: an id led by the send time
            # keeps a disable-then-enable in the order it was sent (the clock may be stepped).
            change_id = f"{time.time_ns():020d}{uuid.uuid4().hex[:12]}"
            futures.append(
                self.client.schedule_task(change_task(name, now, change_id, action, **data))
            )
            sent.append((name, change_id, gone))
        for future in futures:
            future.result(30.0)
        if self.wait_s is not None:
            self._wait(sent)

    def _wait(self, sent: Sequence[tuple[str, str, bool]]) -> None:
        waiting = list(sent)
        wait = ApplyWait(
            self.wait_s or 0,
            lambda left: logger.info(
                "no worker has applied the change(s) to %s yet; waiting up to %.0f s more "
                "(a worker with programs applies them, now or when one starts)",
                [n for n, _, _ in waiting],
                left,
            ),
        )
        while waiting:
            waiting = [
                (name, change, gone)
                for name, change, gone in waiting
                if not _applied(self.store.get(name), change, gone)
            ]
            if not waiting:
                return
            if wait.over():
                raise ScheduleNotAppliedError(
                    f"the change(s) to {[n for n, _, _ in waiting]} were sent, but no worker "
                    f"applied them within {self.wait_s:g}s: is a worker with programs running? "
                    "They apply when one starts."
                )
            time.sleep(self.poll_s)


def _applied(record: ScheduleRecord | None, change_id: str, gone: bool) -> bool:
    if gone:
        return record is None
    return record is not None and record.change_id == change_id
