"""The one printed form of a task key, and its parser.

`str(key)` is `ORDERING_ID/TIME/UNIQUENESS_KEY` with TIME in ISO 8601 UTC with milliseconds
(`orders-44/2026-11-22T10:00:00.000Z/9fca`): logs, errors, Spark job groups and the CLI print it,
and every command that takes a key accepts it, so a key is pasted from a log line into a command.

Ordering ids and uniqueness keys may contain `/` themselves, so the text is not split on every
`/`: the key's time is the segment `/TIME/` that reads as a time (ISO 8601 with a zone, or epoch
milliseconds, the form logs printed before). What lies before it is the ordering id, what lies
after it the uniqueness key. An ISO segment wins over numeric ones, so `clicks/2026/...` with a
printed time still reads one way. A text in which several segments read as a time of the same
kind is refused as ambiguous, naming the readings; the three parts are then given as separate
CLI arguments, which never need splitting.
"""

from __future__ import annotations

import re
from datetime import datetime

from scheduler.errors import InvalidTaskKeyError
from scheduler.model import EARLIEST_MS, LATEST_MS, TaskKey, check_key_part, iso_ms, to_epoch_ms

__all__ = ["EXAMPLE", "TIME_PATTERN", "looks_like_key", "parse_key", "parse_key_time"]

EXAMPLE = "orders-44/2026-11-22T10:00:00.000Z/9fca"
"""A key as printed, for messages."""

# A `/` followed by what may be a time and another `/`; a lookahead, so that the candidates of
# `a/1/2/b` (`1` and `2`) overlap.
TIME_PATTERN = r"-?\d+|\d{4}-\d{2}-\d{2}T[0-9:.,]+(?:Z|[+-]\d{2}(?::?\d{2})?)?"
"""A regular expression of what may be a key's time: epoch milliseconds or ISO 8601."""
_SEGMENT = re.compile(rf"/(?=({TIME_PATTERN})/)")


def looks_like_key(text: str) -> bool:
    """Whether `text` has a `/TIME/` segment: one argument that names a whole key."""
    return _SEGMENT.search(text) is not None


def parse_key(text: str) -> TaskKey:
    """The key printed as `text`; `InvalidTaskKeyError` saying what is wrong otherwise."""
    readings: list[tuple[bool, TaskKey]] = []
    errors: list[str] = []
    for match in _SEGMENT.finditer(text):
        time = match.group(1)
        ordering_id = text[: match.start()]
        uniqueness_key = text[match.end() + len(time) + 1 :]
        try:
            ms = parse_key_time(time)
            check_key_part("ordering_id", ordering_id)
            check_key_part("uniqueness_key", uniqueness_key)
        except InvalidTaskKeyError as error:
            errors.append(str(error))
            continue
        readings.append(
            (not time.lstrip("-").isdigit(), TaskKey.from_ms(ordering_id, ms, uniqueness_key))
        )
    if any(iso for iso, _ in readings):
        keys = [key for iso, key in readings if iso]
    else:
        keys = [key for _, key in readings]
    if len(keys) == 1:
        return keys[0]
    if len(keys) > 1:
        shown = "; ".join(
            f"ordering id {key.ordering_id!r}, time {iso_ms(key.scheduled_ms)}, "
            f"uniqueness key {key.uniqueness_key!r}"
            for key in keys
        )
        raise InvalidTaskKeyError(
            f"{text!r} names a task key in {len(keys)} ways ({shown}); give its three parts "
            "as separate arguments instead: ORDERING_ID TIME UNIQUENESS_KEY"
        )
    if errors:
        raise InvalidTaskKeyError(f"{text!r} is not a task key: {'; '.join(errors)}")
    raise InvalidTaskKeyError(
        f"{text!r} is not a task key; write it as ORDERING_ID/TIME/UNIQUENESS_KEY, as logs print "
        f"it (e.g. {EXAMPLE}), TIME in ISO 8601 with a time zone or epoch milliseconds"
    )


def parse_key_time(text: str) -> int:
    """A key's time, ISO 8601 with a zone or epoch milliseconds, as epoch milliseconds."""
    if text.lstrip("-").isdigit():
        ms = int(text)
        if not EARLIEST_MS <= ms <= LATEST_MS:
            raise InvalidTaskKeyError(
                f"time {text} is out of range: epoch milliseconds go from {EARLIEST_MS} "
                f"(0001-01-01) to {LATEST_MS} (9999-12-31)"
            )
        return ms
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidTaskKeyError(
            f"time {text!r} is not a time; use ISO 8601 with a time zone such as "
            "2026-11-22T10:00:00.000Z, or epoch milliseconds"
        ) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidTaskKeyError(
            f"time {text!r} has no time zone; add one, e.g. {text}Z for UTC (guessing the zone "
            "would name another task)"
        )
    return to_epoch_ms(moment)
