"""Task keys and times as typed on a command line, and finding one task in the store.

A key is given as one argument, ORDERING_ID/TIME/UNIQUENESS_KEY, as logs, errors and the CLI
print it (`scheduler.key_format`), or as three arguments, ORDERING_ID TIME UNIQUENESS_KEY, in the
columns `tasks list` prints, so an operator can paste a log's key or copy a row. TIME is ISO 8601
with a time zone or epoch milliseconds; a time without a zone is refused, because guessing the
zone would address the wrong task (or schedule one hours off).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

import click

from scheduler.admin import describe_key, find_task, iso, partition_of, status_dict
from scheduler.errors import InvalidTaskKeyError
from scheduler.key_format import EXAMPLE, looks_like_key
from scheduler.model import TaskKey, from_epoch_ms

__all__ = [
    "check_partition",
    "describe_key",
    "due_in",
    "find_task",
    "iso",
    "parse_duration",
    "parse_keys",
    "parse_time",
    "partition_of",
    "status_dict",
]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
SECONDS_LIKE_MS = 100_000_000_000
"""Epoch values below this (1973-03-03 as milliseconds, year 5138 as seconds) are taken for
seconds typed where milliseconds are wanted: no task can be due in 1970-1973, since the grace
window refuses any task that old."""
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_time(value: str, option: str) -> datetime:
    """An aware datetime from ISO 8601 with a zone, or from epoch milliseconds."""
    text = value.strip()
    if text.lstrip("-").isdigit():
        if 0 < int(text) < SECONDS_LIKE_MS:
            raise _seconds_not_ms(value, int(text), option)
        try:
            return from_epoch_ms(int(text))
        except (OverflowError, OSError, ValueError):
            raise click.BadParameter(
                f"{value!r} is out of range: a time must lie between 0001-01-01 and 9999-12-31 "
                "(epoch milliseconds from -62135596800000 to 253402300799999)",
                param_hint=option,
            ) from None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a time; use ISO 8601 with a time zone such as "
            "2027-01-31T14:00:00Z or 2027-01-31T15:00:00+01:00, or epoch milliseconds",
            param_hint=option,
        ) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise click.BadParameter(
            f"{value!r} has no time zone; add one, e.g. {text}Z for UTC or {text}+01:00",
            param_hint=option,
        )
    return moment


def _seconds_not_ms(value: str, number: int, option: str) -> click.BadParameter:
    as_ms = iso(number)
    as_seconds = iso(number * 1000)
    return click.BadParameter(
        f"{value!r} read as epoch milliseconds is {as_ms}; {option} takes milliseconds, not "
        f"seconds. If you meant seconds ({as_seconds}), give {number * 1000} or {as_seconds}",
        param_hint=option,
    )


def parse_duration(value: str, option: str) -> timedelta:
    """`30s`, `5m`, `1h30m`, `2d`, `250ms` as a timedelta (never negative)."""
    text = value.strip().lower().replace(" ", "")
    if text.startswith("-"):
        at = "--at" if option.startswith("--") else '"at"'
        raise click.BadParameter(
            f"{value!r} is negative; durations count forward from now and cannot be negative. "
            f"Give a positive one such as {text[1:] or '30s'}, or a time with {at} "
            "(ISO 8601 such as 2027-01-31T14:00:00Z)",
            param_hint=option,
        )
    parts = _DURATION_PART.findall(text)
    if not text or "".join(number + unit for number, unit in parts) != text:
        raise click.BadParameter(
            f"{value!r} is not a duration; use a number with a unit ms, s, m, h or d, "
            "such as 30s, 5m, 1h30m",
            param_hint=option,
        )
    try:
        return timedelta(seconds=sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts))
    except OverflowError:
        raise _too_far(value, option) from None


def due_in(value: str, option: str, now: datetime) -> datetime:
    """`now` plus the duration `value` (`parse_duration`), or a clear error past year 9999."""
    try:
        return now + parse_duration(value, option)
    except OverflowError:
        raise _too_far(value, option) from None


def _too_far(value: str, option: str) -> click.BadParameter:
    return click.BadParameter(
        f"{value!r} is too long: the task would be due after 9999-12-31, the last time a task "
        "can have",
        param_hint=option,
    )


def parse_keys(parts: Sequence[str], option: str = "KEY") -> list[TaskKey]:
    """Keys from arguments that are each a whole key (ORDERING_ID/TIME/UNIQUENESS_KEY) or, three
    at a time, its parts (ORDERING_ID TIME UNIQUENESS_KEY); the two forms may be mixed."""
    if not parts:
        raise click.BadParameter(f"no task given; {_KEY_FORMS}", param_hint=option)
    keys, index = [], 0
    while index < len(parts):
        if looks_like_key(parts[index]):
            try:
                keys.append(TaskKey.parse(parts[index]))
            except InvalidTaskKeyError as error:
                raise click.BadParameter(str(error), param_hint=option) from None
            index += 1
            continue
        triple = parts[index : index + 3]
        if len(triple) < 3:
            raise click.BadParameter(
                f"{' '.join(map(repr, triple))} is not a task; {_KEY_FORMS}", param_hint=option
            )
        ordering_id, time, uniqueness_key = triple
        try:
            keys.append(TaskKey(ordering_id, parse_time(time, option), uniqueness_key))
        except InvalidTaskKeyError as error:
            raise click.BadParameter(str(error), param_hint=option) from None
        index += 3
    return keys


_KEY_FORMS = (
    f"give each task as ORDERING_ID/TIME/UNIQUENESS_KEY, as logs print it (e.g. {EXAMPLE}), or as "
    "three values ORDERING_ID TIME UNIQUENESS_KEY (the first three columns of "
    "`scheduler tasks list`)"
)


def check_partition(partition: int | None, partitions: int, param_hint: str) -> None:
    """Refuse a partition number the topic does not have, saying which it has."""
    if partition is not None and partition >= partitions:
        raise click.BadParameter(
            f"{partition} is not a partition; there are {partitions} (0 to {partitions - 1})",
            param_hint=param_hint,
        )
