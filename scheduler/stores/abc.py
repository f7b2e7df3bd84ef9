"""The task store port: time-bucketed schedule rows and task status rows.

The contract is shaped by Cassandra, the store the distributed mode runs on, and the embedded
SQLite store keeps the same key structure:

* **Schedule rows** (the seed's ScheduledColumnFamily) are keyed by `(partition, bucket)`, where
  `bucket = scheduled_ms // bucket_ms`, and clustered by `(scheduled_ms, ordering_id,
  uniqueness_key)` ascending. A row holds the task's data. Writing a key that exists overwrites
  its data.
* **Status rows** (the seed's CompletionColumnFamily, extended) have the same key and hold the
  state, attempts, last error and next attempt time; they expire after the status retention.
* A task that reaches a final state leaves the schedule rows (its status row is written first, so
  a crash in between leaves a row whose final status tells the engine to skip it). Loading reads
  forward from a cursor with clustering bounds, so deleted rows (Cassandra tombstones) behind the
  cursor are never scanned again.
* Every method is called for one partition by that partition's single writer (its TaskPersistence
  or TaskCompletionTracker); the store needs no locking across partitions beyond its own.
  Admin reads may run from any process at any time.

Methods may raise `BackendUnavailableError` after the adapter's own retries are exhausted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from scheduler.model import ScheduleCursor, StoredTask, Task, TaskKey, TaskState, TaskStatus


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

    # -- metadata ---------------------------------------------------------------------------

    @abstractmethod
    def claim_meta(self, name: str, value: str) -> str:
        """Store `value` under `name` unless a value is already stored; return the stored value.

        Used to pin the partition count the data was partitioned with (Cassandra: a lightweight
        transaction, so two workers starting at once agree).
        """

    # -- schedule rows ----------------------------------------------------------------------

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
    def delete_tasks(self, partition: int, keys: Collection[TaskKey]) -> None:
        """Remove schedule rows (no status change). Missing rows are ignored."""

    # -- status rows ------------------------------------------------------------------------

    @abstractmethod
    def record_statuses(self, partition: int, statuses: Sequence[TaskStatus]) -> None:
        """Upsert status rows; for each final state, then delete the task's schedule row."""

    @abstractmethod
    def fetch_statuses(
        self, partition: int, keys: Collection[TaskKey]
    ) -> dict[TaskKey, TaskStatus]:
        """Status rows of these keys; keys without one are absent from the result."""

    @abstractmethod
    def delete_statuses(self, partition: int, keys: Collection[TaskKey]) -> None:
        """Remove status rows (an operator dropping failed tasks, or a retry starting afresh)."""

    # -- admin ------------------------------------------------------------------------------

    @abstractmethod
    def list_tasks(
        self,
        partition: int,
        *,
        ordering_id: str | None = None,
        states: Collection[TaskState] | None = None,
        limit: int = 100,
    ) -> list[TaskView]:
        """Tasks of one partition in schedule order: every schedule row (pending, running,
        retrying) plus the status rows of final states still retained. Filter by ordering id
        and/or state."""

    @abstractmethod
    def count_due(self, partition: int, now_ms: int) -> int:
        """How many schedule rows of the partition are due at or before `now_ms`."""
