"""The wire format of records on the task log.

Key: the ordering id in UTF-8 (so Kafka's partitioner routes every task of an ordering id to one
partition). Value: a compact JSON object, so that any Kafka client in any language can produce:

    {"v": 1, "op": "schedule", "oid": "...", "at": 1767225600000, "uk": "...", "data": {...}}

`at` is the scheduled time in epoch milliseconds (UTC). `op` is one of:

* `schedule`: persist the task (overwriting a pending task of the same key);
* `cancel`: cancel a pending task (it becomes CANCELLED);
* `retry`: run a FAILED task again, with `data` restored from its status row;
* `drop`: forget a FAILED task's status row;
* `rerun`: run a finished task (SUCCEEDED, FAILED or CANCELLED) once more from its first
  attempt, with `data` if it is not empty, else the data its status row kept.

Admin operations travel on the log rather than writing the store directly, because the worker
that owns the partition is its single writer; the log delivers them to it in order with the tasks.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeGuard

import orjson

from scheduler import speedups
from scheduler.model import (
    EARLIEST_MS,
    LATEST_MS,
    MAX_KEY_BYTES,
    Task,
    TaskKey,
    check_key_part,
    encode_data,
)

FORMAT_VERSION = 1

# One decoder for the process: json.loads with options builds a new one per call.
_DECODER = json.JSONDecoder()
# orjson reads a record three times as fast as the standard library (measured on Python 3.11,
# orjson 3.13: 5 against 16 us under load) but answers differently in two corners: it refuses
# NaN and Infinity, which the standard library reads, and it reads an integer past 64 bits as a
# float. A record orjson refuses, or one with a run of 19 digits (where such an integer could
# be), is read again by the standard library, so every record decodes exactly as before.
_LONG_NUMBER = re.compile(rb"[0-9]{19}").search
_quote = json.encoder.encode_basestring_ascii


class Op(enum.StrEnum):
    SCHEDULE = "schedule"
    CANCEL = "cancel"
    RETRY = "retry"
    DROP = "drop"
    RERUN = "rerun"


_REQUIRED = {
    "op": "the operation",
    "oid": "the ordering id",
    "at": "the scheduled time in epoch milliseconds",
    "uk": "the uniqueness key",
}
"""The fields every record has, with what each one holds."""


class MalformedRecordError(ValueError):
    """A record on the log that is not a valid scheduler message (another producer wrote it)."""


class Command(NamedTuple):
    """A decoded log record: an operation on one task.

    A NamedTuple, not a frozen dataclass: the poll thread makes one per record, and a tuple is
    built in a third of the time (two `object.__setattr__` calls less)."""

    op: Op
    """What to do."""
    task: Task
    """The task (its data is empty for cancel and drop)."""


_OP_BYTES = {op: op.value.encode() for op in Op}
_OPS = {op.value: op for op in Op}
"""Each op by its name: a dict lookup, where `Op(name)` goes through the enum's metaclass."""
_SHORT_KEY_PART = MAX_KEY_BYTES // 4
"""Characters a key part may have without counting its UTF-8 bytes (at most 4 a character)."""


def encode(op: Op, key: TaskKey, data_json: bytes = b"{}") -> bytes:
    """The record value for `op` on `key`; `data_json` is already-encoded task data."""
    # Assembled by hand: a dict through json.dumps costs several times more, on the hot path.
    return b'{"v":%d,"op":"%s","oid":%s,"at":%d,"uk":%s,"data":%s}' % (
        FORMAT_VERSION,
        _OP_BYTES[op],
        _quote(key.ordering_id).encode(),
        key.scheduled_ms,
        _quote(key.uniqueness_key).encode(),
        data_json,
    )


DUMPS = orjson.dumps
# Dates and dataclasses are refused, as the standard library refuses them, rather than written in
# a form that does not read back as what was given.
DUMPS_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_native_encode = speedups.native.encode_schedule if speedups.native is not None else None


def encode_schedule(key: TaskKey, data: Mapping[str, Any], max_data_bytes: int) -> bytes:
    """The `schedule` record value for a task, or the `TaskDataError` that refuses its data.

    In C where it is built (`scheduler.speedups`), for the common task; else, and for any other
    task, `encode_schedule_in_python`, which writes the same bytes."""
    if _native_encode is not None:
        value = _native_encode(key, data, max_data_bytes, DUMPS, DUMPS_OPTIONS)
        if value is not None:
            return value
    return encode_schedule_in_python(key, data, max_data_bytes)


def schedule_encoder() -> Callable[[TaskKey, Mapping[str, Any], int], bytes]:
    """The `encode_schedule` for objects made now: the Python one when `SCHEDULER_SPEEDUPS=0`
    turned the C path off (`scheduler.speedups.enabled`), so that nothing of it is left."""
    return encode_schedule if speedups.enabled() else encode_schedule_in_python


def encode_schedule_in_python(key: TaskKey, data: Mapping[str, Any], max_data_bytes: int) -> bytes:
    """`encode_schedule` in Python: the reference the C path is held to.

    The same bytes as `encode(Op.SCHEDULE, key, encode_data(data, ...))` up to JSON spelling, in
    one orjson call: the two-step form cost a third of `schedule_task`. orjson differs from the
    standard library's checks in a few corners (it writes NaN as null, refuses non-string keys),
    so any record those could concern (a `null` in non-empty data, an orjson error, a size near
    the limit) is checked the two-step way too, which gives exactly the old answer: accepted or a
    clear error.
    """
    try:
        value = DUMPS(
            {
                "v": FORMAT_VERSION,
                "op": "schedule",
                "oid": key.ordering_id,
                "at": key.scheduled_ms,
                "uk": key.uniqueness_key,
                "data": data,
            },
            option=DUMPS_OPTIONS,
        )
    except orjson.JSONEncodeError:
        return encode(Op.SCHEDULE, key, encode_data(data, max_bytes=max_data_bytes))
    if len(value) > max_data_bytes or (data and _find_null(value) is not None):
        encode_data(data, max_bytes=max_data_bytes)  # raises if the data is not acceptable
    return value


def compact(value: bytes) -> bytes:
    """`value` in a bytes object of its own size, for a caller that keeps it a while.

    orjson returns its output in the buffer it wrote it into, about 4 KB whatever the length
    (measured with tracemalloc: 4,090 bytes for a record of 63; orjson 3.13). A record sent to
    Kafka at once is copied by librdkafka and freed, so `schedule_task` need not care; but the
    embedded log keeps values in its queue and its tail (100,000 records: 400 MB instead of 15),
    and `schedule_tasks` holds a whole batch. `b"%b" %` copies in 50 ns, the cheapest way found
    (`bytes(memoryview(...))` takes 110)."""
    return b"%b" % value


# `re`'s search for a literal is twice as fast as `b"null" in value` (measured on Python 3.11:
# 340 against 630 ns in 1 KB of text, 100 against 170 ns in 140 bytes), and every record with
# data is searched.
_find_null = re.compile(rb"null").search


def loads_record(value: bytes) -> Any:
    """JSON bytes as `json.loads` reads them, through orjson where that gives the same answer.

    Raises what `json.loads` raises: `UnicodeDecodeError`, `json.JSONDecodeError`,
    `RecursionError`."""
    if _LONG_NUMBER(value) is None:
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            pass  # the standard library's answer: its error message, or NaN and Infinity read
    return _DECODER.decode(value.decode("utf-8"))


def _read_record(value: bytes) -> Any:
    """`loads_record` for `decode`: a record without data, whose fields are all of the types a
    scheduler record has, holds no number orjson could have read differently, so the search
    for 19 digits (which costs more than orjson's whole parse of a short record) is skipped."""
    try:
        message = orjson.loads(value)
    except orjson.JSONDecodeError:
        return _DECODER.decode(value.decode("utf-8"))  # the standard library's answer
    if (
        type(message) is dict
        and not message.get("data")
        and type(message.get("at")) is int
        and message.get("v") == FORMAT_VERSION
        and type(message.get("oid")) is str
        and type(message.get("uk")) is str
    ):
        return message
    if _LONG_NUMBER(value) is None:
        return message
    return _DECODER.decode(value.decode("utf-8"))


def decode(value: bytes | None) -> Command:
    """Decode a record value, or raise `MalformedRecordError` saying what is wrong with it."""
    if value is None:
        raise MalformedRecordError("record has no value")
    try:
        message: Any = _read_record(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MalformedRecordError(f"record value is not JSON: {error}") from error
    except RecursionError:
        # Arrays or objects nested thousands deep: the parser gives up. Not caught, this
        # stopped the worker, and the next one stopped at the same record.
        raise MalformedRecordError("record value is nested too deeply to decode") from None
    if type(message) is dict:
        command = _plain_command(message)
        if command is not None:
            return command
    return _checked_command(message)


def _plain_command(message: dict[str, Any]) -> Command | None:
    """The command of a record that passes every check of `_checked_command` on its first
    reading (what `schedule_task` writes), or None to have that function judge it. Run per
    record on the poll thread: one dict lookup for the op instead of the enum's call, and a
    key part's UTF-8 bytes counted only when it is long enough to matter."""
    name = message.get("op")
    op = _OPS.get(name) if type(name) is str else None  # a list or an object is unhashable
    ordering_id = message.get("oid")
    uniqueness_key = message.get("uk")
    scheduled_ms = message.get("at")
    data = message.get("data", {})
    if (
        op is None
        or message.get("v") != FORMAT_VERSION
        or type(scheduled_ms) is not int
        or not EARLIEST_MS <= scheduled_ms <= LATEST_MS
        or type(data) is not dict
        or not _plain_key_part(ordering_id)
        or not _plain_key_part(uniqueness_key)
    ):
        return None
    return Command(
        op, Task.from_key(TaskKey.from_ms(ordering_id, scheduled_ms, uniqueness_key), data)
    )


def _plain_key_part(value: object) -> TypeGuard[str]:
    """Whether `check_key_part` accepts `value` for certain, without counting its bytes."""
    return (
        type(value) is str
        and 0 < len(value) <= _SHORT_KEY_PART
        and not value.isspace()
        and "\x00" not in value
    )


def _checked_command(message: Any) -> Command:
    """`decode`'s every check, each failure raised with what is wrong."""
    if not isinstance(message, dict):
        raise MalformedRecordError("record value is not a JSON object")
    if message.get("v") != FORMAT_VERSION:
        raise MalformedRecordError(f"unsupported format version {message.get('v')!r}")
    missing = [name for name in _REQUIRED if name not in message]
    if missing:
        # Named as the record spells them: "uniqueness_key must be a string, got NoneType
        # None" sent the reader looking for a field the record calls `uk`.
        fields = ", ".join(f"{name!r} ({_REQUIRED[name]})" for name in missing)
        raise MalformedRecordError(
            f"record has no {fields}; a scheduler record has "
            + ", ".join(repr(name) for name in _REQUIRED)
        )
    try:
        op = Op(str(message.get("op")))
    except ValueError:
        raise MalformedRecordError(
            f"unknown op {message.get('op')!r}; a record's op is one of "
            f"{', '.join(op.value for op in Op)}",
        ) from None
    try:
        ordering_id = check_key_part("ordering_id", message.get("oid"))
        uniqueness_key = check_key_part("uniqueness_key", message.get("uk"))
    except ValueError as error:
        raise MalformedRecordError(str(error)) from error
    scheduled_ms = message.get("at")
    if not isinstance(scheduled_ms, int) or isinstance(scheduled_ms, bool):
        raise MalformedRecordError(f"'at' must be epoch milliseconds, got {scheduled_ms!r}")
    if not EARLIEST_MS <= scheduled_ms <= LATEST_MS:
        # Past 64 bits the store cannot hold it, and the partition would retry the batch
        # forever; beyond year 9999 no datetime can show it. `schedule_task` never writes one.
        raise MalformedRecordError(
            f"'at' must be epoch milliseconds of a date in years 1 to 9999 "
            f"({EARLIEST_MS} to {LATEST_MS}), got {scheduled_ms}"
        )
    data = message.get("data", {})
    if not isinstance(data, dict):
        raise MalformedRecordError(f"'data' must be a JSON object, got {type(data).__name__}")
    key = TaskKey.from_ms(ordering_id, scheduled_ms, uniqueness_key)
    return Command(op, Task.from_key(key, data))
