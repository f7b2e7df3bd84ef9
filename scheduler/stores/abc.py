"""The task store port: time-bucketed schedule rows and task status rows.

The contract is shaped by Cassandra, the store the distributed mode runs on, and the embedded
SQLite store keeps the same key structure:

* **Schedule rows** (the seed's ScheduledColumnFamily) are keyed by `(partition, bucket)`, where
  `bucket = scheduled_ms // bucket_ms`, and clustered by `(scheduled_ms, ordering_id,
  uniqueness_key)` ascending. A row holds the task's data. Writing a key that exists overwrites
  its data.
* **Status rows** (the seed's CompletionColumnFamily, extended) have the same key and hold the
  state, attempts, last error and next attempt time; they expire after the status retention.
* **Attempt records** (`Attempt`): each attempt of a task, keyed like its status row and then
  by attempt number (Cassandra: the `task_attempts` table, clustered by attempt under the
  task's key). They travel with status changes (`TaskStatus.attempt_log`) and expire after the
  status retention, counted from each record's last write, like the status row.
* A task that reaches a final state leaves the schedule rows (its status row is written first, so
  a crash in between leaves a row whose final status tells the engine to skip it). Loading reads
  forward from a cursor with clustering bounds, so deleted rows (Cassandra tombstones) behind the
  cursor are never scanned again.
* Every method is called for one partition by that partition's single writer (its
  TaskPersistence); the store needs no locking across partitions beyond its own.
  Admin reads may run from any process at any time.
* **Malformed records** (records on the log that do not decode: another producer wrote them) are
  kept by `(partition, offset)` for operators to look at, and expire with the status retention.
  They are evidence, not tasks: the worker inserts them before it commits past them, and an
  operator's `drop_malformed` deletes them directly.

Methods may raise `BackendUnavailableError` after the adapter's own retries are exhausted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import astuple, dataclass
from typing import Any

from scheduler.model import (
    Attempt,
    AttemptOutcome,
    ScheduleCursor,
    StoredTask,
    Task,
    TaskKey,
    TaskState,
    TaskStatus,
)

MALFORMED_KEPT_BYTES = 64 * 1024
"""How much of a malformed record's key and of its value is kept: enough to see what went wrong
and who wrote it, while a producer writing megabyte records of garbage cannot fill the store."""


@dataclass(frozen=True, slots=True)
class MalformedRecord:
    """A record the workers could not decode, kept where an operator can find it."""

    partition: int
    """The log partition it was read from."""
    offset: int
    """Its offset in that partition."""
    reason: str
    """Why it does not decode."""
    key: bytes | None
    """Its key (at most `MALFORMED_KEPT_BYTES`), or None if it had none."""
    value: bytes | None
    """Its value (at most `MALFORMED_KEPT_BYTES`), or None for a record without one."""
    value_bytes: int
    """The size of the whole value: more than `len(value)` when the value was cut."""
    timestamp_ms: int
    """The record's own timestamp (when the producer or the broker stamped it)."""
    seen_ms: int
    """When a worker set it aside."""

    def columns(self) -> tuple[Any, ...]:
        """Every field after `partition`, in order: what the stores write beside their keys."""
        return astuple(self)[1:]

    @classmethod
    def of(
        cls,
        partition: int,
        offset: int,
        *,
        reason: str,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        seen_ms: int,
    ) -> MalformedRecord:
        """The record as kept: key and value cut to `MALFORMED_KEPT_BYTES`."""
        return cls(
            partition,
            offset,
            reason,
            None if key is None else key[:MALFORMED_KEPT_BYTES],
            None if value is None else value[:MALFORMED_KEPT_BYTES],
            0 if value is None else len(value),
            timestamp_ms,
            seen_ms,
        )


def encode_attempt(attempt: Attempt, unset: Any = None) -> tuple[Any, ...]:
    """An attempt record's columns after its task's key, as both stores keep them: `unset` for
    what the record does not know (Cassandra: the driver's UNSET_VALUE, which leaves a stored
    value as it is and writes no tombstone)."""
    values = (
        attempt.started_ms,
        attempt.ended_ms,
        attempt.outcome.value,
        attempt.exit_code,
        attempt.error,
        attempt.worker,
        attempt.log_path,
    )
    return (attempt.number, *(unset if value is None else value for value in values))


def decode_attempt(row: Sequence[Any]) -> Attempt:
    """An attempt record from the columns `encode_attempt` makes."""
    number, started_ms, ended_ms, outcome, exit_code, error, worker, log_path = row
    outcome = AttemptOutcome(outcome) if outcome else AttemptOutcome.RUNNING
    return Attempt(number, started_ms, ended_ms, outcome, exit_code, error, worker, log_path)


@dataclass(frozen=True, slots=True)
class TaskView:
    """One task as the admin view shows it: its schedule row and/or status row."""

    partition: int
    """The partition the task belongs to."""
    task: Task
    """The task (data from the schedule row, or from a failed task's status row)."""
    status: TaskStatus | None
    """Its status row, if any."""

    @property
    def state(self) -> TaskState:
        return self.status.state if self.status else TaskState.PENDING


class TaskStore(ABC):
    """Schedule and status rows of every partition of one scheduler topic."""

    bucket_ms: int
    """Width of a schedule-row bucket in milliseconds."""

    @abstractmethod
    def open(self, *, create_schema: bool = True) -> None:
        """Connect, and create the schema idempotently if `create_schema`."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def problem(self) -> str | None:
        """What keeps the store from working while its users run on and keep trying (Cassandra:
        every node down, or a new connection's login refused), in words that say what to do;
        None while nothing does. Answers from what the client already knows, without a round
        trip, so a probe can ask it every second. Any thread."""
        return None

    def check_replaced(self) -> None:
        """Raise `StoreReplacedError` if what this process opened was deleted or replaced under
        it in a way it cannot follow (SQLite: its file); a local check of a microsecond, asked
        by a worker before every commit. By default there is nothing to check: a Cassandra
        keyspace dropped and created again by `schema apply` is the same store to a running
        one (see `schema_gone`)."""
        return None

    @abstractmethod
    def read_meta(self, name: str) -> str | None:
        """The value stored under `name`, or None if none is."""

    @abstractmethod
    def claim_meta(self, name: str, value: str) -> str:
        """Store `value` under `name` unless a value is already stored; return the stored value.

        Used to pin the partition count the data was partitioned with (Cassandra: a lightweight
        transaction, so two workers starting at once agree).
        """

    def together(self) -> AbstractContextManager[None]:
        """A block whose writes (`write_tasks`, `record_statuses`, `delete_tasks`) this thread
        makes go to the store in one round trip where the backend can (SQLite: one savepoint
        of one transaction), durable when the block ends; a write in the block may return
        before its rows are written, and a read in it need not see them. Without such a
        backend the writes are made one by one, as outside the block."""
        return nullcontext()

    @abstractmethod
    def write_tasks(self, partition: int, tasks: Sequence[Task]) -> None:
        """Upsert schedule rows. Durable when it returns. Tasks may fall in any buckets."""

    @abstractmethod
    def load_tasks(
        self, partition: int, after: ScheduleCursor | None, until_ms: int, limit: int
    ) -> list[StoredTask]:
        """Schedule rows with `after < (scheduled_ms, ordering_id, uniqueness_key)` (all rows if
        `after` is None) and `scheduled_ms <= until_ms`, in schedule order, at most `limit`, each
        with its status row if it has one. Rows of every age are found, however old."""

    @abstractmethod
    def load_keys(self, partition: int, keys: Collection[TaskKey]) -> list[StoredTask]:
        """The schedule rows of these keys that exist, in schedule order, each with its status
        row if it has one (a partition's next owner loads the stragglers of its reload mark)."""

    @abstractmethod
    def delete_tasks(self, partition: int, keys: Collection[TaskKey]) -> None:
        """Remove schedule rows (no status change). Missing rows are ignored."""

    @abstractmethod
    def record_statuses(self, partition: int, statuses: Sequence[TaskStatus]) -> None:
        """Upsert status rows (a later status of a key in `statuses` wins), and the attempt
        records each carries in its `attempt_log`; for each final state, then delete the task's
        schedule row.

        An attempt record of a (key, number) already stored is updated field by field: a field
        that is None in the record written keeps the stored value (an attempt's end, written
        without its start time, keeps the start); the outcome is always replaced. The records
        are as durable as the status rows when this returns."""

    @abstractmethod
    def fetch_statuses(
        self, partition: int, keys: Collection[TaskKey]
    ) -> dict[TaskKey, TaskStatus]:
        """Status rows of these keys; keys without one are absent from the result."""

    @abstractmethod
    def delete_statuses(self, partition: int, keys: Collection[TaskKey]) -> None:
        """Remove status rows and the tasks' attempt records (an operator dropping failed
        tasks, or a retry starting afresh: its attempts are numbered from 1 again)."""

    @abstractmethod
    def attempts(self, partition: int, key: TaskKey) -> list[Attempt]:
        """The attempt records of one task not yet expired, by attempt number (an admin read;
        the engine never reads them). Empty for a task that never started."""

    @abstractmethod
    def list_tasks(
        self,
        partition: int,
        *,
        ordering_id: str | None = None,
        states: Collection[TaskState] | None = None,
        limit: int = 100,
        after: ScheduleCursor | None = None,
        from_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[TaskView]:
        """Tasks of one partition in schedule order: every schedule row (pending, running,
        retrying) plus the status rows of final states still retained. Filter by ordering id
        and/or state, and by scheduled time in `[from_ms, until_ms)`. A page of a longer
        listing starts after the cursor `after` (the last key of the page before): operators'
        bulk changes read a million tasks that way, a page at a time."""

    @abstractmethod
    def count_due(self, partition: int, now_ms: int, *, after: ScheduleCursor | None = None) -> int:
        """How many schedule rows of the partition are due at or before `now_ms` (only those
        after `after`, if given: from a reload mark, without reading the rows behind it)."""

    @abstractmethod
    def set_aside(self, records: Sequence[MalformedRecord]) -> None:
        """Keep malformed records, of any partitions; durable when it returns. Setting aside a
        (partition, offset) again overwrites it (a worker reads a record again after a rewind)."""

    @abstractmethod
    def malformed_records(
        self, partition: int | None = None, *, from_offset: int = 0, limit: int = 100
    ) -> list[MalformedRecord]:
        """Kept malformed records not yet expired, in (partition, offset) order: one
        partition's from `from_offset` on, or every partition's."""

    @abstractmethod
    def malformed_counts(self, limit: int) -> dict[int, int]:
        """How many malformed records each partition keeps, counting at most `limit` in all
        (a producer that wrote garbage for hours must not make a status query slow). Reads
        only the records' keys, never their values."""

    @abstractmethod
    def drop_malformed(self, partition: int, offsets: Collection[int]) -> None:
        """Forget kept malformed records (an operator has dealt with them). Missing ones are
        ignored."""
