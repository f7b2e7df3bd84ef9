"""The schedule store port: schedules, their pending jobs and the reverse index, as rows.

Contract (the suite in tests/contracts/test_schedule_store_contract.py holds every adapter to it):

* A schedule is keyed by its name. `put` writes its record (replacing any) together with its
  rows in the list index (by trigger type and status) and in the reverse index (one row per
  event key its triggers listen to: `program:<name>` for PROGRAM_STATUS, `dataset:<name>` for
  PARTITION); keys the previous record had and this one has not leave the reverse index.
  `delete` removes the record, its list and trigger index rows and its jobs; keys added with
  `add_key` are the caller's to remove (a task for a deleted schedule does nothing anyway).
  Every write of one schedule comes from its own engine queue (`schedule:<name>`), one at a
  time, and is safe to repeat: a task re-executed after a crash writes the same rows again.
* `list_schedules` pages by name (ascending, strictly after `after`), optionally of one trigger
  type and/or one status, without reading other schedules' records: 100,000 schedules cost rows.
  `list_listed` is the same page as `ListedSchedule`s: what a listing shows, read from the
  `Schedule.to_json()` text stored beside each record (`LISTED_KEY`) instead of decoding and
  re-checking the definition; a record stored without it is decoded.
* `names_for_key` reads the reverse index: the names of the schedules an event key concerns,
  whatever their status (a disabled schedule's task drops the event). `add_key` and
  `remove_key` maintain extra keys a schedule listens to for a while (`run-end:<program>` while
  a job waits for a run of its program to end).
* Jobs are keyed by (schedule, job key); `put_job` replaces one, `jobs` lists a schedule's jobs
  oldest first (revision, then generation), `delete_job` removes one; `put_jobs` writes many and
  deletes some in one batch, some one by one and some as every job of a schedule before a given
  one (`job.trim`); `jobs_of` reads the jobs of many schedules at once (a tick's).
* The fire index (`scheduler.schedules.fires`): rows keyed by (instant, shard, name, cron);
  `put_fires` writes rows (the same row again is one row), `fires` reads one instant and shard's
  rows, `delete_fires` removes them all. Rows are hints checked against the record, so a
  schedule's delete leaves its rows to the tick that skips them. These rows and the records'
  fire state are also written by the tick of a shard's queue (`fires:<shard>`), not the
  schedule's own: `get_versioned` reads records with their stored text, and `replace_many`
  writes a record only if its stored text is still the one read (a compare-and-set: whatever the
  schedule's own queue wrote meanwhile wins).

Methods may raise `BackendUnavailableError` after the adapter's own retries are exhausted.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from scheduler.schedules.job import Job, job_order, key_order
from scheduler.schedules.model import Partition, ProgramStatus, Schedule, leaves

ENABLED = "ENABLED"
DISABLED = "DISABLED"
STATUSES = (ENABLED, DISABLED)
TRIGGER_TYPES = ("TIME", "PARTITION", "PROGRAM_STATUS", "AND", "OR")


@dataclass(frozen=True, slots=True)
class FireRow:
    """One fire of the index: cron `cron` of schedule `name` (at `revision`) at `fire_ms`."""

    fire_ms: int
    """The fire's instant (epoch ms): with `shard`, the partition the tick reads."""
    shard: int
    """`shard_of(name)`."""
    name: str
    """The schedule's name."""
    cron: int
    """The index of the cron in `Schedule.crons()`."""
    revision: int
    """The schedule's revision that indexed it; another revision's tick skips the row."""


def event_keys(schedule: Schedule) -> set[str]:
    """The event keys (as `scheduler.programs.events` names them) the schedule's triggers count."""
    keys: set[str] = set()
    for leaf in leaves(schedule.trigger):
        if isinstance(leaf, Partition):
            keys.add(f"dataset:{leaf.dataset}")
        elif isinstance(leaf, ProgramStatus):
            keys.add(f"program:{leaf.program}")
    return keys


@dataclass(frozen=True)
class ScheduleRecord:
    """A schedule as stored: its definition and the state its own queue keeps."""

    schedule: Schedule
    """The definition (name, program, trigger, constraints...)."""
    revision: int
    """Bumped by every create and update; tasks of an older revision are no-ops."""
    enabled: bool = False
    """Schedules are created disabled."""
    created_ms: int = 0
    updated_ms: int = 0
    """The last change of definition or status."""
    disabled_ms: int | None = None
    """When it was last disabled (for `reenable` over a time range)."""
    change_id: str = ""
    """The id of the last change request applied (a client waits for it)."""
    last_fires: dict[str, int] = field(default_factory=dict)
    """Per cron (index in `Schedule.crons()` as text): the last fire handled."""
    next_fires: dict[str, int] = field(default_factory=dict)
    """Per cron: the fire enqueued next."""
    source: str = ""
    """Who declared it: `apply:<label>` for a file applied with `schedules apply`, else empty."""

    @property
    def name(self) -> str:
        return self.schedule.name

    @property
    def status(self) -> str:
        return ENABLED if self.enabled else DISABLED

    @property
    def trigger_type(self) -> str:
        return self.schedule.trigger.type

    def changed(self, **changes: Any) -> ScheduleRecord:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule.to_json(),
            "revision": self.revision,
            "status": self.status,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
            "disabled_ms": self.disabled_ms,
            "change_id": self.change_id,
            "last_fires": dict(self.last_fires),
            "next_fires": dict(self.next_fires),
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScheduleRecord:
        return cls(
            schedule=Schedule.model_validate(data["schedule"]),
            revision=int(data["revision"]),
            enabled=data["status"] == ENABLED,
            created_ms=int(data.get("created_ms") or 0),
            updated_ms=int(data.get("updated_ms") or 0),
            disabled_ms=data.get("disabled_ms"),
            change_id=str(data.get("change_id") or ""),
            last_fires={k: int(v) for k, v in (data.get("last_fires") or {}).items()},
            next_fires={k: int(v) for k, v in (data.get("next_fires") or {}).items()},
            source=str(data.get("source") or ""),
        )


LISTED_KEY = "schedule_text_v1"
"""The key, in a stored record's JSON, of its `Schedule.to_json()` as text (text, so that the
store's sorted-key dump keeps the definition's own key order, as the API shows it). Rename it
(`_v2`) whenever `Schedule.to_json`'s output changes shape: records without the current key are
decoded, so an old text is never shown as if current."""


def stored_json(record: ScheduleRecord) -> dict[str, Any]:
    """The JSON a store writes for `record`: `to_json()` and the definition's text beside it.

    The text is what a read of the record shows: the definition decoded from the stores'
    sorted-key JSON (free-form maps such as `properties` come back in sorted order), so that a
    listing from the text and one from the decoded record are the same JSON, key order included.
    """
    as_read = Schedule.model_validate(
        json.loads(json.dumps(record.schedule.to_json(), sort_keys=True))
    )
    text = json.dumps(as_read.to_json(), separators=(",", ":"), ensure_ascii=False)
    return {**record.to_json(), LISTED_KEY: text}


def with_fire_state(text: str, record: ScheduleRecord) -> dict[str, Any]:
    """The stored JSON `text` with `record`'s fire state (`last_fires`, `next_fires`) instead of
    its own: what `stored_json(record)` gives when only the fire state changed, without
    decoding and re-dumping the definition."""
    stored: dict[str, Any] = orjson.loads(text)
    stored["last_fires"] = dict(record.last_fires)
    stored["next_fires"] = dict(record.next_fires)
    return stored


@dataclass(frozen=True, slots=True)
class ListedSchedule:
    """A schedule as a listing shows it: the record's state and its definition as JSON
    (`Schedule.to_json()`), not a `Schedule` (whose decoding re-checks every cron)."""

    name: str
    status: str
    trigger_type: str
    program: str
    revision: int
    created_ms: int
    updated_ms: int
    disabled_ms: int | None
    next_fires: dict[str, int]
    source: str
    schedule: dict[str, Any]

    @classmethod
    def of(cls, record: ScheduleRecord) -> ListedSchedule:
        return cls(
            name=record.name,
            status=record.status,
            trigger_type=record.trigger_type,
            program=record.schedule.program,
            revision=record.revision,
            created_ms=record.created_ms,
            updated_ms=record.updated_ms,
            disabled_ms=record.disabled_ms,
            next_fires=dict(record.next_fires),
            source=record.source,
            schedule=record.schedule.to_json(),
        )

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> ListedSchedule:
        """From a stored record's JSON: its definition's text if it has one, else decoded."""
        text = data.get(LISTED_KEY)
        if not isinstance(text, str):
            return cls.of(ScheduleRecord.from_json(data))
        schedule = orjson.loads(text)
        return cls(
            name=schedule["name"],
            status=ENABLED if data["status"] == ENABLED else DISABLED,
            trigger_type=schedule["trigger"]["type"],
            program=schedule["program"]["programName"],
            revision=int(data["revision"]),
            created_ms=int(data.get("created_ms") or 0),
            updated_ms=int(data.get("updated_ms") or 0),
            disabled_ms=data.get("disabled_ms"),
            next_fires={k: int(v) for k, v in (data.get("next_fires") or {}).items()},
            source=str(data.get("source") or ""),
            schedule=schedule,
        )


class ScheduleStore(ABC):
    """The schedules of one deployment, their jobs and their reverse index."""

    @abstractmethod
    def open(self, *, create_schema: bool = True) -> None:
        """Connect, and create the tables idempotently if `create_schema`."""

    @abstractmethod
    def close(self) -> None:
        """Release connections (not those of a task store this store borrowed them from)."""

    @abstractmethod
    def get(self, name: str) -> ScheduleRecord | None:
        """The schedule of this name, or None."""

    @abstractmethod
    def put(self, record: ScheduleRecord) -> None:
        """Write `record` with its list and reverse-index rows (replacing the previous ones)."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Remove the schedule, its list and trigger index rows and its jobs (nothing if it
        does not exist)."""

    @abstractmethod
    def list_schedules(
        self,
        *,
        trigger_type: str | None = None,
        status: str | None = None,
        after: str = "",
        limit: int = 100,
    ) -> list[ScheduleRecord]:
        """At most `limit` schedules named after `after`, by name, of the type and status."""

    def list_listed(
        self,
        *,
        trigger_type: str | None = None,
        status: str | None = None,
        after: str = "",
        limit: int = 100,
    ) -> list[ListedSchedule]:
        """`list_schedules`' page as `ListedSchedule`s; adapters read them without decoding."""
        page = self.list_schedules(
            trigger_type=trigger_type, status=status, after=after, limit=limit
        )
        return [ListedSchedule.of(record) for record in page]

    @abstractmethod
    def names_for_key(self, key: str) -> list[str]:
        """The names of the schedules event key `key` concerns, sorted."""

    @abstractmethod
    def add_key(self, key: str, name: str) -> None:
        """Make `name` listen to `key` too (until `remove_key` or its delete)."""

    @abstractmethod
    def remove_key(self, key: str, name: str) -> None:
        """Stop `name` listening to `key` (nothing if it did not)."""

    @abstractmethod
    def put_job(self, job: Job) -> None:
        """Write the job (keyed by its schedule's name and `job.key`)."""

    @abstractmethod
    def jobs(self, name: str) -> list[Job]:
        """The schedule's stored jobs, oldest first (revision, then generation)."""

    def jobs_of(self, names: Sequence[str]) -> dict[str, list[Job]]:
        """`jobs` of each name (an empty list for a schedule without jobs); adapters read them
        in a few requests rather than one per name."""
        return {name: self.jobs(name) for name in names}

    @abstractmethod
    def delete_job(self, name: str, job_key: str) -> None:
        """Remove one job (nothing if it does not exist)."""

    def put_jobs(
        self,
        jobs: Sequence[Job],
        *,
        delete: Sequence[tuple[str, str]] = (),
        below: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Write `jobs`, delete the (schedule name, job key) pairs of `delete`, and for each
        (schedule name, job key) of `below` every job of that schedule ordered before that key
        (revision, then generation); adapters batch them."""
        for job in jobs:
            self.put_job(job)
        for name, job_key in delete:
            self.delete_job(name, job_key)
        for name, job_key in below:
            floor = key_order(job_key)
            for job in self.jobs(name):
                if job_order(job) < floor:
                    self.delete_job(name, job.key)

    @abstractmethod
    def put_fires(self, rows: list[FireRow]) -> None:
        """Write rows of the fire index (a row written again stays one row)."""

    @abstractmethod
    def fires(self, fire_ms: int, shard: int) -> list[FireRow]:
        """The index rows of instant `fire_ms` and `shard`, by name then cron."""

    @abstractmethod
    def delete_fires(self, fire_ms: int, shard: int) -> None:
        """Remove every row of instant `fire_ms` and `shard`."""

    @abstractmethod
    def get_versioned(self, names: list[str]) -> dict[str, tuple[ScheduleRecord, str]]:
        """The records of `names` that exist, each with its stored text (for `replace_many`)."""

    @abstractmethod
    def replace_many(self, changes: list[tuple[str, ScheduleRecord]]) -> set[str]:
        """For each (text read, new record): write the record if its stored text is still the
        text read. The new record keeps the trigger type and status (only its fire state
        changes). Returns the names written."""
