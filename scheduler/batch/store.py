"""The batch store port: the configuration in force, each job's compact state, and the history of
every attempt of every partition, on SQLite and on Cassandra.

Contract (the suite in tests/contracts/test_batch_store_contract.py holds every adapter to it):

* Everything is scoped by a configuration name (`default` unless told), so one deployment can
  run several files; the engine writes each name from one queue (`batch:<name>`), one task at a
  time, so no write here needs to be conditional.
* `configuration` returns the last record `save_configuration` wrote (the last *good* file: an
  invalid one is never saved), or None. A restart reads it instead of the file.
* `states` returns every job's state as `save_states` last wrote it; `save_states` writes the
  states given (others stay as they are) and deletes those named in `removed`.
* `record_attempt` writes one attempt of one partition, replacing a record of the same
  (job, partition, attempt): the start writes it RUNNING, the end writes it again finished.
* `attempts` lists a job's attempts newest partition first, then newest attempt first; of one
  partition, or of partitions in [first_ms, stop_ms).
* `read` returns `configuration` and `states` together; `write` writes what one task changed
  (`Changes`: attempts, states, removed states, the configuration) as if by `record_attempt`,
  `save_states` and `save_configuration`; `last_attempts` returns the highest attempt number
  recorded of each partition asked for (partitions without a record are left out). Adapters
  override them to save round trips: the batch queue calls each once per task.
* `delete_attempts_before` deletes the history of a job's partitions before `cutoff_ms`
  (retention); `delete_job` deletes everything of a job (it was removed and its runs ended).

Methods may raise `BackendUnavailableError` after the adapter's own retries are exhausted.
"""

from __future__ import annotations

import enum
import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.batch.codec import decode_state
from scheduler.batch.state import JobState

DEFAULT_NAME = "default"
"""The configuration name when none is given."""


@dataclass(frozen=True, slots=True)
class StoredConfiguration:
    """The configuration in force, as the store keeps it."""

    text: str
    """The file's text as it was loaded (checked: parse it with `parse_configuration`)."""
    loaded_ms: int
    """When it was applied."""
    paused: frozenset[str] = field(default_factory=frozenset)
    """Jobs paused by an operator (`scheduler jobs pause`), whatever the file says."""
    wake_ms: int | None = None
    """The instant of the wake task already scheduled (so a decision does not enqueue it
    again)."""
    source: str = ""
    """Where it came from: a file path, or `api`."""

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "loaded_ms": self.loaded_ms,
            "paused": sorted(self.paused),
            "wake_ms": self.wake_ms,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredConfiguration:
        return cls(
            text=str(data["text"]),
            loaded_ms=int(data["loaded_ms"]),
            paused=frozenset(data.get("paused") or ()),
            wake_ms=data.get("wake_ms"),
            source=str(data.get("source") or ""),
        )


class AttemptStatus(enum.StrEnum):
    """How one attempt of a partition stands or ended."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    MARKED_SUCCESS = "MARKED_SUCCESS"
    """It failed, and the job's policy was mark_success: distinguishable from a success."""
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt (one run) of one partition of a job."""

    job: str
    partition: int
    """Epoch ms (UTC) of the partition."""
    attempt: int
    """1 for the first run of the partition, 2 for its first retry..."""
    run_id: str
    """The run in `scheduler runs`."""
    status: AttemptStatus
    started_ms: int
    ended_ms: int | None = None
    reason: str | None = None
    """Why it failed (the run's error)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "partition": self.partition,
            "attempt": self.attempt,
            "run_id": self.run_id,
            "status": str(self.status),
            "started_ms": self.started_ms,
            "ended_ms": self.ended_ms,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Attempt:
        return cls(
            job=str(data["job"]),
            partition=int(data["partition"]),
            attempt=int(data["attempt"]),
            run_id=str(data["run_id"]),
            status=AttemptStatus(data["status"]),
            started_ms=int(data["started_ms"]),
            ended_ms=data.get("ended_ms"),
            reason=data.get("reason"),
        )


def dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


@functools.lru_cache(maxsize=4096)
def read_state(text: str) -> JobState:
    """The state stored as `text`. Every task of the batch queue reads every job's state and
    changes a few: an unchanged text is decoded once (states are immutable, so sharing is safe)."""
    return decode_state(json.loads(text))


@dataclass(frozen=True, slots=True)
class Changes:
    """What one task of the batch queue writes back."""

    states: Mapping[str, JobState] = field(default_factory=dict)
    """The states that changed, by job."""
    removed: Collection[str] = ()
    """Jobs whose state goes (removed by a reload, their last run ended)."""
    attempts: Sequence[Attempt] = ()
    """Attempts started or ended (each replaces the record of its (job, partition, attempt))."""
    configuration: StoredConfiguration | None = None
    """The configuration in force, if it changed."""

    def __bool__(self) -> bool:
        return bool(self.states or self.removed or self.attempts or self.configuration)


class BatchStore(ABC):
    """The batch jobs of one deployment (see the module docstring for the contract)."""

    @abstractmethod
    def open(self, *, create_schema: bool = True) -> None:
        """Connect, and create the tables idempotently if `create_schema`."""

    @abstractmethod
    def close(self) -> None:
        """Release connections (not those of a task store this store borrowed them from)."""

    @abstractmethod
    def configuration(self, name: str = DEFAULT_NAME) -> StoredConfiguration | None:
        """The configuration in force under `name`, or None before the first load."""

    @abstractmethod
    def save_configuration(self, record: StoredConfiguration, name: str = DEFAULT_NAME) -> None:
        """Make `record` the configuration in force under `name` (durable)."""

    @abstractmethod
    def states(self, name: str = DEFAULT_NAME) -> dict[str, JobState]:
        """Every job's state under `name`, by job name."""

    @abstractmethod
    def save_states(
        self,
        states: Mapping[str, JobState],
        name: str = DEFAULT_NAME,
        *,
        removed: Collection[str] = (),
    ) -> None:
        """Write `states` (other jobs' stay as they are); delete the states of `removed`."""

    @abstractmethod
    def record_attempt(self, attempt: Attempt, name: str = DEFAULT_NAME) -> None:
        """Write `attempt`, replacing the record of the same (job, partition, attempt)."""

    @abstractmethod
    def attempts(
        self,
        job: str,
        name: str = DEFAULT_NAME,
        *,
        partition: int | None = None,
        first_ms: int | None = None,
        stop_ms: int | None = None,
        limit: int = 1000,
    ) -> list[Attempt]:
        """The attempts of `job` (of one `partition`, or in [first_ms, stop_ms)), newest
        partition first, then newest attempt first, at most `limit`."""

    @abstractmethod
    def delete_attempts_before(self, job: str, cutoff_ms: int, name: str = DEFAULT_NAME) -> None:
        """Delete the attempts of `job`'s partitions before `cutoff_ms`."""

    @abstractmethod
    def delete_job(self, job: str, name: str = DEFAULT_NAME) -> None:
        """Delete the state and every attempt of `job`."""

    def read(
        self, name: str = DEFAULT_NAME
    ) -> tuple[StoredConfiguration | None, dict[str, JobState]]:
        """`configuration` and `states` of `name`, read together."""
        return self.configuration(name), self.states(name)

    def write(self, changes: Changes, name: str = DEFAULT_NAME) -> None:
        """Write what one task changed: its attempts, then its states, then the configuration."""
        for attempt in changes.attempts:
            self.record_attempt(attempt, name)
        if changes.states or changes.removed:
            self.save_states(changes.states, name, removed=changes.removed)
        if changes.configuration is not None:
            self.save_configuration(changes.configuration, name)

    def last_attempts(
        self, wanted: Mapping[str, Collection[int]], name: str = DEFAULT_NAME
    ) -> dict[tuple[str, int], int]:
        """The highest attempt recorded of each (job, partition) of `wanted` (job -> its
        partitions); partitions never attempted are not in the result."""
        found: dict[tuple[str, int], int] = {}
        for job, partitions in wanted.items():
            for partition in partitions:
                history = self.attempts(job, name, partition=partition, limit=1)
                if history:
                    found[job, partition] = history[0].attempt
        return found
