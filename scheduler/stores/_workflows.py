"""What the SQLite and Cassandra adapters of the workflow ports (schedules, runs, batch jobs)
share: records as the rows keep them (canonical JSON text), and the port methods that both
adapters answer with another of their own methods."""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

import orjson

from scheduler.batch.state import JobState
from scheduler.batch.store import DEFAULT_NAME, Attempt, BatchStore, Changes, StoredConfiguration
from scheduler.programs.model import Run
from scheduler.schedules.abc import ListedSchedule, ScheduleRecord, ScheduleStore
from scheduler.schedules.job import Job

Listed = TypeVar("Listed", bound=ScheduleRecord | ListedSchedule)


def dump(value: Any) -> str:
    """`value` as a row keeps it: compact JSON with sorted keys."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def read_schedule(text: str) -> ScheduleRecord:
    # orjson: a tick reads every record of its instant (`get_versioned`), 10,000 at a time.
    return ScheduleRecord.from_json(orjson.loads(text))


def read_listed(text: str) -> ListedSchedule:
    return ListedSchedule.from_stored(orjson.loads(text))


def dump_run(run: Run) -> str:
    return dump(run.to_json())


def read_run(text: str) -> Run:
    return Run.from_json(json.loads(text))


def read_configuration(text: str) -> StoredConfiguration:
    return StoredConfiguration.from_json(json.loads(text))


class ScheduleStoreAdapter(ScheduleStore):
    """`list_schedules` and `list_listed` as one page read, and the single-job methods as the
    adapter's batched `jobs_of` and `put_jobs` (which the adapter must define)."""

    @abstractmethod
    def _page(
        self,
        decode: Callable[[str], Listed],
        trigger_type: str | None,
        status: str | None,
        after: str,
        limit: int,
    ) -> list[Listed]:
        """A page of `list_schedules`, each stored record's text decoded by `decode`."""

    def list_schedules(
        self,
        *,
        trigger_type: str | None = None,
        status: str | None = None,
        after: str = "",
        limit: int = 100,
    ) -> list[ScheduleRecord]:
        return self._page(read_schedule, trigger_type, status, after, limit)

    def list_listed(
        self,
        *,
        trigger_type: str | None = None,
        status: str | None = None,
        after: str = "",
        limit: int = 100,
    ) -> list[ListedSchedule]:
        return self._page(read_listed, trigger_type, status, after, limit)

    def put_job(self, job: Job) -> None:
        self.put_jobs([job])

    def jobs(self, name: str) -> list[Job]:
        return self.jobs_of([name])[name]

    def delete_job(self, name: str, job_key: str) -> None:
        self.put_jobs([], delete=[(name, job_key)])


class BatchStoreAdapter(BatchStore):
    """Every single write of the batch port as the adapter's `write` of one `Changes` (which
    the adapter must define)."""

    def save_configuration(self, record: StoredConfiguration, name: str = DEFAULT_NAME) -> None:
        self.write(Changes(configuration=record), name)

    def save_states(
        self,
        states: Mapping[str, JobState],
        name: str = DEFAULT_NAME,
        *,
        removed: Collection[str] = (),
    ) -> None:
        self.write(Changes(states=states, removed=removed), name)

    def record_attempt(self, attempt: Attempt, name: str = DEFAULT_NAME) -> None:
        self.write(Changes(attempts=[attempt]), name)
