"""Tasks, their keys and their statuses.

A task is identified by its `TaskKey`: (ordering_id, scheduled_time, uniqueness_key). The scheduled
time is kept as whole milliseconds since the Unix epoch in UTC (`scheduled_ms`), because that is
what the stores cluster by and what Kafka timestamps use; `scheduled_time` gives it back as an
aware datetime.

Two orders matter:

* *schedule order* `(scheduled_ms, ordering_id, uniqueness_key)`: the clustering order of the
  schedule rows, in which a partition's tasks are loaded and fired;
* *key order within an ordering id* `(scheduled_ms, uniqueness_key)`: the order in which one
  ordering id's tasks run, one at a time. Schedule order restricted to one ordering id is exactly
  that, so sorting keys with `<` serves both.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from json import encoder as _json_encoder
from typing import Any

from scheduler.errors import InvalidTaskKeyError, NaiveDatetimeError, TaskDataError

#: Longest ordering id or uniqueness key, in UTF-8 bytes. Cassandra allows 64 KiB per clustering
#: value, but every key travels in every message and row; a key this long is a bug upstream.
MAX_KEY_BYTES = 512

ScheduleCursor = tuple[int, str, str]
"""A position in schedule order: (scheduled_ms, ordering_id, uniqueness_key)."""


def to_epoch_ms(moment: datetime | str) -> int:
    """Milliseconds since the epoch of an aware datetime (or an ISO 8601 string with a zone,
    `2027-01-01T00:00:00Z`), truncated (not rounded) to the ms."""
    if not isinstance(moment, datetime):
        moment = parse_scheduled_time(moment)
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise NaiveDatetimeError(
            f"scheduled time {moment.isoformat()} has no time zone; pass an aware datetime, "
            "for example datetime.now(timezone.utc) + timedelta(minutes=5)"
        )
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def parse_scheduled_time(value: object) -> datetime:
    """The aware datetime an ISO 8601 string with a zone names; a clear error for anything else
    (a string without a zone is refused by `to_epoch_ms`, as a naive datetime is)."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidTaskKeyError(
                f"scheduled time {value!r} is not an ISO 8601 time; write it with a zone such "
                "as 2027-01-01T00:00:00Z or 2027-01-01T01:00:00+01:00, or pass an aware datetime"
            ) from None
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise NaiveDatetimeError(
                f"scheduled time {value!r} has no time zone; add one, such as {value.strip()}Z "
                f"for UTC or {value.strip()}+01:00"
            )
        return moment
    raise InvalidTaskKeyError(
        f"scheduled time must be an aware datetime or an ISO 8601 string with a zone, got "
        f"{type(value).__name__} {value!r}"
        + (
            "; for epoch milliseconds use scheduler.model.from_epoch_ms(ms)"
            if isinstance(value, int | float)
            else ""
        )
    )


def from_epoch_ms(ms: int) -> datetime:
    """The aware UTC datetime of an epoch-millisecond value, exactly: `fromtimestamp(ms / 1000)`
    goes through a float, which from about 2128 on is a few microseconds short, and
    `to_epoch_ms` of that (truncating) gave back the millisecond before."""
    return _EPOCH + timedelta(milliseconds=ms)


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC with milliseconds and a Z, as keys print their time:
    `2026-11-22T10:00:00.000Z`."""
    return from_epoch_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EARLIEST_MS = to_epoch_ms(datetime.min.replace(tzinfo=UTC))
"""The first millisecond a task may be scheduled at (0001-01-01): what a datetime can say."""
LATEST_MS = to_epoch_ms(datetime.max.replace(tzinfo=UTC))
"""The last millisecond a task may be scheduled at (9999-12-31)."""


def check_key_part(name: str, value: object) -> str:
    """Return `value` if it can serve as an ordering id or uniqueness key, else raise."""
    if not isinstance(value, str):
        raise InvalidTaskKeyError(f"{name} must be a string, got {type(value).__name__} {value!r}")
    if not value.strip():
        raise InvalidTaskKeyError(f"{name} is empty; give every task a non-blank {name}")
    if "\x00" in value:
        raise InvalidTaskKeyError(f"{name} {value!r} contains a NUL character; remove it")
    if len(value.encode("utf-8")) > MAX_KEY_BYTES:
        raise InvalidTaskKeyError(
            f"{name} {value[:40]!r}... is longer than {MAX_KEY_BYTES} UTF-8 bytes; "
            "use a shorter id (a hash of a long one works)"
        )
    return value


class TaskKey:
    """The identity of a task: (ordering_id, scheduled_time, uniqueness_key).

    Enqueuing a task whose key is already pending overwrites its data; a key that reached a final
    state never runs again. Keys sort in schedule order.
    """

    __slots__ = ("_hash", "ordering_id", "scheduled_ms", "uniqueness_key")

    ordering_id: str
    """Tasks of one ordering id run one at a time, in key order; it is the Kafka message key."""
    scheduled_ms: int
    """The due time, in milliseconds since the epoch (UTC)."""
    uniqueness_key: str
    """Tells apart tasks of one ordering id due at the same millisecond."""
    _hash: int

    def __init__(
        self, ordering_id: str, scheduled_time: datetime | str, uniqueness_key: str
    ) -> None:
        self._set(
            check_key_part("ordering_id", ordering_id),
            to_epoch_ms(scheduled_time),
            check_key_part("uniqueness_key", uniqueness_key),
        )

    @classmethod
    def from_ms(cls, ordering_id: str, scheduled_ms: int, uniqueness_key: str) -> TaskKey:
        """Build a key from trusted parts (read back from a store or a log), skipping checks."""
        key = cls.__new__(cls)
        key._set(ordering_id, scheduled_ms, uniqueness_key)
        return key

    @classmethod
    def parse(cls, text: str) -> TaskKey:
        """The key printed as `str(key)`: `ORDERING_ID/TIME/UNIQUENESS_KEY`, TIME in ISO 8601
        with a zone or epoch milliseconds (see `scheduler.key_format`). Raises
        `InvalidTaskKeyError` saying what is wrong with `text`."""
        from scheduler.key_format import parse_key

        return parse_key(text)

    def _set(self, ordering_id: str, scheduled_ms: int, uniqueness_key: str) -> None:
        setter = object.__setattr__
        setter(self, "ordering_id", ordering_id)
        setter(self, "scheduled_ms", scheduled_ms)
        setter(self, "uniqueness_key", uniqueness_key)
        setter(self, "_hash", hash((scheduled_ms, ordering_id, uniqueness_key)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"TaskKey is immutable; cannot set {name}")

    @property
    def scheduled_time(self) -> datetime:
        return from_epoch_ms(self.scheduled_ms)

    @property
    def cursor(self) -> ScheduleCursor:
        """This key's position in schedule order."""
        return (self.scheduled_ms, self.ordering_id, self.uniqueness_key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskKey):
            return NotImplemented
        return (
            self.scheduled_ms == other.scheduled_ms
            and self.ordering_id == other.ordering_id
            and self.uniqueness_key == other.uniqueness_key
        )

    def __lt__(self, other: TaskKey) -> bool:
        return self.cursor < other.cursor

    def __le__(self, other: TaskKey) -> bool:
        return self.cursor <= other.cursor

    def __gt__(self, other: TaskKey) -> bool:
        return self.cursor > other.cursor

    def __ge__(self, other: TaskKey) -> bool:
        return self.cursor >= other.cursor

    def __repr__(self) -> str:
        return f"TaskKey.parse({str(self)!r})"

    def __str__(self) -> str:
        """The one printed form, in logs, errors, Spark job groups and the CLI, which every
        command that takes a key accepts: `orders-44/2026-11-22T10:00:00.000Z/9fca`."""
        return f"{self.ordering_id}/{iso_ms(self.scheduled_ms)}/{self.uniqueness_key}"


class Task:
    """Work to be done at a given time: a key and a JSON-serialisable mapping of data."""

    __slots__ = ("data", "key")

    key: TaskKey
    """The task's identity."""
    data: Mapping[str, Any]
    """Arguments for the executor; must survive a JSON round trip."""

    def __init__(
        self,
        ordering_id: str,
        scheduled_time: datetime | str,
        uniqueness_key: str,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise TaskDataError(f"task data must be a mapping (a dict), got {type(data).__name__}")
        object.__setattr__(self, "key", TaskKey(ordering_id, scheduled_time, uniqueness_key))
        object.__setattr__(self, "data", data)

    @classmethod
    def from_key(cls, key: TaskKey, data: Mapping[str, Any]) -> Task:
        task = cls.__new__(cls)
        object.__setattr__(task, "key", key)
        object.__setattr__(task, "data", data)
        return task

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Task is immutable; cannot set {name}")

    @property
    def ordering_id(self) -> str:
        return self.key.ordering_id

    @property
    def scheduled_time(self) -> datetime:
        return self.key.scheduled_time

    @property
    def scheduled_ms(self) -> int:
        return self.key.scheduled_ms

    @property
    def uniqueness_key(self) -> str:
        return self.key.uniqueness_key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Task):
            return NotImplemented
        return self.key == other.key and self.data == other.data

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Task({self.key!r}, data={dict(self.data)!r})"


# Compact JSON, no NaN. Built once: `json.dumps` and `JSONEncoder.encode` build a new C encoder
# on every call, which cost more than the rest of `schedule_task` together. Without circular
# checks (markers=None) it is reusable; a circular structure raises RecursionError instead.
_DATA_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_C_MAKE_ENCODER: Any = getattr(_json_encoder, "c_make_encoder", None)
_ENCODE_DATA = (
    None
    if _C_MAKE_ENCODER is None
    else _C_MAKE_ENCODER(
        # markers, default, encoder, indent, key and item separators, sort_keys, skipkeys,
        # allow_nan: JSONEncoder.iterencode's arguments, minus the circular check.
        None,
        _DATA_ENCODER.default,
        _json_encoder.encode_basestring_ascii,
        None,
        ":",
        ",",
        False,
        False,
        False,
    )
)


def _to_json(data: Mapping[str, Any]) -> str:
    if _ENCODE_DATA is not None:
        return "".join(_ENCODE_DATA(data, 0))
    return _DATA_ENCODER.encode(data)


def encode_data(data: Mapping[str, Any], *, max_bytes: int) -> bytes:
    """Serialise task data as compact JSON, or raise `TaskDataError` saying why it cannot be."""
    try:
        encoded = _to_json(data).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as error:
        raise TaskDataError(
            f"task data cannot be serialised as JSON ({error}); use only dicts, lists, strings, "
            "numbers, booleans and None"
        ) from error
    if len(encoded) > max_bytes:
        raise TaskDataError(
            f"task data is {len(encoded)} bytes as JSON, over the limit of {max_bytes}; "
            "store large inputs elsewhere and pass their location"
        )
    return encoded


class TaskState(enum.StrEnum):
    """Where a task is in its life. The last three are final: the key never runs again."""

    PENDING = "pending"
    """Persisted, not yet started."""
    RUNNING = "running"
    """An attempt is executing."""
    RETRYING = "retrying"
    """An attempt failed; the next one waits until `next_attempt_ms`."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """Every attempt failed; kept for inspection until an operator retries or drops it."""
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in _FINAL_STATES


_FINAL_STATES = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})


class AttemptOutcome(enum.StrEnum):
    """How one attempt of a task ended (or that it has not yet)."""

    RUNNING = "running"
    """Started, not ended (or its worker died and no owner has looked at it since)."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """The executor raised (a command's non-zero exit among them)."""
    TIMED_OUT = "timed_out"
    """Cancelled by the per-task timeout (`task_timeout_s` or a command's `timeout_s`)."""
    CANCELLED = "cancelled"
    """Cancelled by an operator."""
    INTERRUPTED = "interrupted"
    """Its worker stopped it (the partition moved, the worker stopped past its deadline) or
    died; the task runs again."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a task, as its history keeps it."""

    number: int
    """Which attempt (1-based), as `ExecutionContext.attempt` numbers it."""
    started_ms: int | None = None
    """When the executor call began (None: not known to the writer of this record)."""
    ended_ms: int | None = None
    """When it ended (None while running)."""
    outcome: AttemptOutcome = AttemptOutcome.RUNNING
    """How it ended."""
    exit_code: int | None = None
    """The exit code of the process the executor ran (the command executor), if any."""
    error: str | None = None
    """The error it failed with, cut to a few thousand characters."""
    worker: str | None = None
    """The id of the worker process that ran it (its `client_id`)."""
    log_path: str | None = None
    """Where the executor wrote the attempt's output, if it says so."""

    @property
    def duration_ms(self) -> int | None:
        """`ended_ms - started_ms`, once both are known."""
        if self.started_ms is None or self.ended_ms is None:
            return None
        return self.ended_ms - self.started_ms

    def merged_over(self, earlier: Attempt) -> Attempt:
        """This record written over `earlier` (same number): what the stores keep, each field
        from this record unless it is None here."""
        return Attempt(
            self.number,
            _first(self.started_ms, earlier.started_ms),
            _first(self.ended_ms, earlier.ended_ms),
            self.outcome,
            _first(self.exit_code, earlier.exit_code),
            _first(self.error, earlier.error),
            _first(self.worker, earlier.worker),
            _first(self.log_path, earlier.log_path),
        )


def _first(value: Any, otherwise: Any) -> Any:
    return otherwise if value is None else value


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """A status row: what happened to a task so far."""

    key: TaskKey
    """The task this row describes."""
    state: TaskState
    """Its state when the row was written."""
    attempts: int = 0
    """Attempts started so far."""
    last_error: str | None = None
    """The error of the last failed attempt, for the operator."""
    next_attempt_ms: int | None = None
    """When the next attempt may start (RETRYING only)."""
    updated_ms: int = 0
    """When the row was written."""
    data: Mapping[str, Any] | None = None
    """The task's data, kept with the final status of a task that ran (SUCCEEDED, FAILED), so
    that an operator can read it, and retry a failed one, until the status expires."""
    attempt_log: tuple[Attempt, ...] = ()
    """Attempt records that change with this status, written beside it (`record_statuses`)
    and kept as long. A status read back from a store carries none: `TaskStore.attempts`
    reads a task's history."""

    def with_attempts(self, earlier: Sequence[Attempt]) -> TaskStatus:
        """This status carrying `earlier` records too (its own win, merged field by field):
        what replaces an unwritten status of the same key, so no attempt's record is lost."""
        if not earlier:
            return self
        mine = self.attempt_log
        log: tuple[Attempt, ...]
        if len(earlier) == 1 and len(mine) == 1 and earlier[0].number == mine[0].number:
            log = (mine[0].merged_over(earlier[0]),)  # an attempt's end over its start: no sort
        else:
            merged = {attempt.number: attempt for attempt in earlier}
            for attempt in mine:
                before = merged.get(attempt.number)
                merged[attempt.number] = attempt if before is None else attempt.merged_over(before)
            log = tuple(merged[number] for number in sorted(merged))
        return TaskStatus(
            self.key,
            self.state,
            self.attempts,
            self.last_error,
            self.next_attempt_ms,
            self.updated_ms,
            self.data,
            log,
        )


@dataclass(frozen=True, slots=True)
class StoredTask:
    """A schedule row read back from a store, joined with its status row if it has one."""

    task: Task
    """The task as last written."""
    status: TaskStatus | None
    """Its status row, or None if it never started."""
