"""Durations as the seed writes them ("-1 hours", "30 days", "1000 millis") and the one calendar
arithmetic that every batch computation uses.

Instants are epoch milliseconds in UTC. Millis, seconds, minutes, hours and days are fixed
lengths (UTC has no daylight saving time, so a day is always 86 400 s). Months and years (twelve
months) are calendar lengths: they are counted in whole months from an anchor and the day of the
month is clamped once, at the end, to the length of the month reached. So Jan 31 + 1 month is
Feb 29 (in 2000), + 2 months is Mar 31, + 3 months Apr 30: never drifting to the 28th or 29th as
repeated one-month steps would.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

_FIXED_MS = {
    "millis": 1,
    "seconds": 1_000,
    "minutes": 60_000,
    "hours": 3_600_000,
    "days": 86_400_000,
}
_MONTHS = {"months": 1, "years": 12}
UNITS = (*_FIXED_MS, *_MONTHS)
"""The units the seed accepts, plural as it writes them; matched case-insensitively."""
_DURATION = re.compile(r"^([+-]?)(\d+) +([a-z]+)$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PARTITION_FORMAT = "%Y-%m-%d %H:%M:%S"
"""The seed's ``yyyy-MM-dd HH:mm:ss``, in UTC."""


@dataclass(frozen=True, slots=True)
class Duration:
    """A signed length: `months` calendar months plus `millis` fixed milliseconds (one of them is
    zero for a duration read from the seed's format)."""

    millis: int = 0
    months: int = 0
    text: str = field(default="", compare=False)
    """As written in the configuration, for messages."""

    @property
    def is_zero(self) -> bool:
        return self.millis == 0 and self.months == 0

    @property
    def is_negative(self) -> bool:
        return self.millis < 0 or self.months < 0

    def negated(self) -> Duration:
        return Duration(-self.millis, -self.months, f"-({self.text})")

    def __str__(self) -> str:
        return self.text or f"{self.months} months {self.millis} millis"


def parse_duration(text: str, *, signed: bool = False) -> Duration:
    """A Duration from the seed's ``"<integer> <unit>"``; ValueError says what to write.

    Without `signed` (every field but a dependency's shift) a minus sign is refused."""
    match = _DURATION.match(text.strip().lower()) if isinstance(text, str) else None
    if match is None or match.group(3) not in UNITS:
        raise ValueError(
            f"{text!r} is not a duration; write '<integer> <unit>' with a unit among "
            f"{', '.join(UNITS)}, e.g. '1 hours'"
        )
    sign, amount, unit = match.groups()
    if sign == "-" and not signed:
        raise ValueError(f"{text!r} is negative; only a dependency's shift may be")
    value = -int(amount) if sign == "-" else int(amount)
    if unit in _MONTHS:
        return Duration(months=value * _MONTHS[unit], text=text)
    return Duration(millis=value * _FIXED_MS[unit], text=text)


def to_datetime(ms: int) -> datetime:
    """The instant `ms` as an aware UTC datetime."""
    return _EPOCH + timedelta(milliseconds=ms)


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime."""
    if moment.tzinfo is None:
        raise ValueError(f"{moment!r} has no time zone; give it tzinfo=UTC")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def add_months(anchor_ms: int, months: int) -> int:
    """`anchor_ms` moved by whole calendar months, the day clamped to the month reached."""
    if months == 0:
        return anchor_ms
    moment = to_datetime(anchor_ms)
    total = moment.year * 12 + (moment.month - 1) + months
    year, month = divmod(total, 12)
    day = min(moment.day, calendar.monthrange(year, month + 1)[1])
    return to_ms(moment.replace(year=year, month=month + 1, day=day))


def month_index(ms: int) -> int:
    """Months since year 0 of the month holding `ms`, for estimating month differences."""
    moment = to_datetime(ms)
    return moment.year * 12 + moment.month - 1


def add(ms: int, duration: Duration) -> int:
    """`ms` moved by `duration`: its months first (clamped), then its fixed part."""
    return add_months(ms, duration.months) + duration.millis


def parse_partition(text: str) -> int:
    """Epoch ms of a partition written ``yyyy-MM-dd HH:mm:ss`` (UTC); ValueError otherwise."""
    try:
        moment = datetime.strptime(text, PARTITION_FORMAT)
    except (TypeError, ValueError):
        raise ValueError(
            f"{text!r} is not a partition date; write 'yyyy-MM-dd HH:mm:ss', "
            "e.g. '2000-01-01 00:00:00' (UTC)"
        ) from None
    return to_ms(moment.replace(tzinfo=UTC))


def format_partition(ms: int) -> str:
    """The partition at `ms` as the seed writes it: ``yyyy-MM-dd HH:mm:ss`` in UTC."""
    return to_datetime(ms).strftime(PARTITION_FORMAT)
