"""Cron expressions evaluated in an explicit IANA time zone.

Three forms are read:

* five fields, ``minute hour day-of-month month day-of-week`` (Vixie cron: day 0 and 7 are
  Sunday; when both day fields are restricted, a day matching either one fires), and Vixie's
  ``@hourly``, ``@daily`` (``@midnight``), ``@weekly``, ``@monthly``, ``@yearly`` (``@annually``);
* six fields with seconds first, ``second minute hour day-of-month month day-of-week``;
* the seeds' Quartz dialect: six or seven fields with a ``?`` in one day field
  (``0 0/5 * * * ?``). It is accepted where its text means the same here (``?``, steps, ranges,
  day names, ``L``, ``LW``, ``NAME#n``) and refused otherwise with the equivalent in the message:
  Quartz counts days of the week from Sunday = 1, so ``2`` is Monday there and Tuesday here.

Matching is done by cronsim on the wall clock of the zone; this module maps wall-clock fire times
to instants itself, because cronsim's own zone handling follows Debian cron (a six-field or
every-N-minutes expression fires twice in a repeated hour, and a six-field fire in a skipped hour
is lost). The rule here, for every expression: a fire whose wall time falls in a skipped hour
fires once, at the instant the clocks jump; a wall time that occurs twice fires once, at its first
occurrence. A schedule that must keep its cadence through the changes uses the zone ``UTC``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from scheduler.model import from_epoch_ms, to_epoch_ms
from scheduler.schedules.errors import CronError, ScheduleError

_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_FIELD_NAMES = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_FORMS = (
    "write five fields (minute hour day-of-month month day-of-week), six with seconds first, "
    "or Quartz's six or seven with '?' in one day field"
)
# A candidate wall time that maps to an instant on the wrong side of the one asked about is
# skipped; at most a skipped hour of per-second fires can be, so this bound is never reached
# by a valid expression.
_MAX_SKIPS = 10_000


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The IANA time zone called `name`, or a ScheduleError that says how to name one."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin', "
            "'America/New_York' or 'UTC'"
        ) from None


def wall_to_instant_ms(wall: datetime, tz: ZoneInfo) -> int:
    """The instant (epoch ms) of a naive wall-clock time in `tz`, by the DST rule: a wall time in
    a skipped hour is the instant the clocks jump; a repeated one is its first occurrence."""
    first = wall.replace(tzinfo=tz, fold=0)
    if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall:
        return to_epoch_ms(first)
    return _jump_ms(wall, tz)


def instant_to_wall(instant_ms: int, tz: ZoneInfo) -> datetime:
    """The aware wall-clock time of an instant in `tz` (its `fold` says which pass of a repeated
    hour it is in)."""
    return from_epoch_ms(instant_ms).astimezone(tz)


def _offset(second: int, tz: ZoneInfo) -> timedelta | None:
    return datetime.fromtimestamp(second, tz).utcoffset()


def _first_second_with_offset(lo: int, hi: int, offset: timedelta | None, tz: ZoneInfo) -> int:
    """The first second in (lo, hi] whose offset is `offset`, where lo's is not and hi's is."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset(mid, tz) == offset:
            hi = mid
        else:
            lo = mid
    return hi


def _jump_ms(wall: datetime, tz: ZoneInfo) -> int:
    """The instant the clocks jump over the skipped wall time `wall` (tz transitions fall on
    whole seconds)."""
    early, late = sorted(to_epoch_ms(wall.replace(tzinfo=tz, fold=f)) for f in (0, 1))
    after = _offset(late // 1000, tz)
    return _first_second_with_offset(early // 1000, late // 1000, after, tz) * 1000


def _repeat_end_wall(instant_ms: int, tz: ZoneInfo) -> datetime:
    """For an instant in the second pass of a repeated hour: the naive wall time at which the
    repetition ends (03:00 when 02:00-03:00 is repeated)."""
    local = instant_to_wall(instant_ms, tz)
    now_offset = local.utcoffset()
    first_offset = local.replace(fold=0).utcoffset()
    assert now_offset is not None and first_offset is not None
    second = instant_ms // 1000
    back = int((first_offset - now_offset).total_seconds())
    jump = _first_second_with_offset(second - back - 1, second, now_offset, tz)
    return (from_epoch_ms(jump * 1000) + first_offset).replace(tzinfo=None)


def _quartz_day_name(token: str, expression: str) -> str:
    if token in _DAY_NAMES:
        return token
    if token.isdigit() and 1 <= int(token) <= 7:
        return _DAY_NAMES[int(token) - 1]
    raise CronError(
        f"cron expression {expression!r}: Quartz's day-of-week {token!r} is not a day; "
        "Quartz counts 1-7 from Sunday, or write SUN-SAT"
    )


def _quartz_day_of_week(field: str, expression: str) -> tuple[str, bool]:
    """Quartz's day-of-week field in cron's terms, and whether its text already meant that."""
    parts: list[str] = []
    exact = True
    for token in field.split(","):
        step = ""
        if "/" in token:
            token, rest = token.split("/", 1)
            step = "/" + rest
        if token == "*":
            parts.append(token + step)
        elif token == "L":
            parts.append("SAT" + step)
            exact = False
        elif token.endswith("L"):
            parts.append(f"{_DAY_NAMES.index(_quartz_day_name(token[:-1], expression))}L")
            exact = False
        elif "#" in token:
            day, nth = token.split("#", 1)
            exact = exact and not day.isdigit()
            parts.append(f"{_quartz_day_name(day, expression)}#{nth}{step}")
        else:
            days = token.split("-")
            exact = exact and not any(day.isdigit() for day in days)
            parts.append("-".join(_quartz_day_name(day, expression) for day in days) + step)
    return ",".join(parts), exact


def _quartz_day_of_month(field: str, expression: str) -> str:
    if field.startswith("L-"):
        raise CronError(
            f"cron expression {expression!r}: Quartz's {field!r} (days before the month's last) "
            "has no equivalent here; use 'L' for the last day, or list the days"
        )
    if "W" in field and field != "LW":
        raise CronError(
            f"cron expression {expression!r}: Quartz's {field!r} (the weekday nearest a date) has "
            "no equivalent here; use 'LW' (the last weekday) or a day range with day-of-week "
            "MON-FRI"
        )
    return field


def _from_quartz(fields: list[str], expression: str) -> list[str]:
    if len(fields) == 7:
        year = fields.pop()
        if year not in ("*", "?"):
            raise CronError(
                f"cron expression {expression!r}: the year field {year!r} has no equivalent "
                f"here; drop it (equivalent without it: '{' '.join(fields)}') and disable the "
                "schedule when its years are over"
            )
    second, minute, hour, day, month, weekday = fields
    if (day == "?") == (weekday == "?"):
        raise CronError(
            f"cron expression {expression!r}: Quartz wants '?' in exactly one of day-of-month "
            "and day-of-week"
        )
    day = "*" if day == "?" else _quartz_day_of_month(day, expression)
    weekday, exact = ("*", True) if weekday == "?" else _quartz_day_of_week(weekday, expression)
    converted = [second, minute, hour, day, month, weekday]
    if not exact:
        raise CronError(
            f"cron expression {expression!r} is in Quartz's dialect, whose days of the week count "
            "from Sunday = 1 (cron counts from Sunday = 0), so it would fire on other days here; "
            f"the equivalent is '{' '.join(converted)}'"
        )
    return converted


_MACROS = {
    "@YEARLY": "0 0 1 1 *",
    "@ANNUALLY": "0 0 1 1 *",
    "@MONTHLY": "0 0 1 * *",
    "@WEEKLY": "0 0 * * 0",
    "@DAILY": "0 0 * * *",
    "@MIDNIGHT": "0 0 * * *",
    "@HOURLY": "0 * * * *",
}


def normalize(expression: str) -> str:
    """The six-field form (seconds first) that cronsim reads, or a CronError."""
    fields = _MACROS.get(expression.strip().upper(), expression).upper().split()
    if len(fields) == 5:
        fields = ["0", *fields]
    elif len(fields) == 7 or (len(fields) == 6 and "?" in expression):
        fields = _from_quartz(fields, expression)
    elif len(fields) != 6:
        raise CronError(f"cron expression {expression!r} has {len(fields)} fields; {_FORMS}")
    for index, value in enumerate(fields):
        if "?" in value:
            if index not in (3, 5) or value != "?":
                raise CronError(
                    f"cron expression {expression!r}: '?' stands alone, in a day field only"
                )
            fields[index] = "*"
    normalized = " ".join(fields)
    try:
        CronSim(normalized, datetime(2000, 1, 1))
    except CronSimError as error:
        name = str(error).removeprefix("Bad ")
        field = fields[_FIELD_NAMES.index(name)] if name in _FIELD_NAMES else "?"
        raise CronError(
            f"cron expression {expression!r}: bad {name} field {field!r}; {_FORMS}"
        ) from None
    return normalized


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression in its time zone. Instants are epoch milliseconds (UTC)."""

    expression: str
    """As the user wrote it."""
    time_zone: str
    """The IANA zone whose wall clock the expression is read on."""
    fields: str
    """The six-field form, seconds first, that is evaluated."""

    def next_after(self, after_ms: int) -> int:
        """The first fire strictly after `after_ms`."""
        tz = zone(self.time_zone)
        local = instant_to_wall(after_ms, tz)
        start = local.replace(tzinfo=None)
        if local.fold:
            start = _repeat_end_wall(after_ms, tz) - timedelta(seconds=1)
        candidates = CronSim(self.fields, start)
        for _ in range(_MAX_SKIPS):
            fire = wall_to_instant_ms(self._next(candidates), tz)
            if fire > after_ms:
                return fire
        raise CronError(f"cron expression {self.expression!r}: no fire found after {after_ms}")

    def previous_before(self, before_ms: int) -> int:
        """The last fire strictly before `before_ms`."""
        tz = zone(self.time_zone)
        local = instant_to_wall(before_ms, tz)
        start = local.replace(tzinfo=None)
        if local.fold:
            start = _repeat_end_wall(before_ms, tz)
        candidates = CronSim(self.fields, start, reverse=True)
        for _ in range(_MAX_SKIPS):
            fire = wall_to_instant_ms(self._next(candidates), tz)
            if fire < before_ms:
                return fire
        raise CronError(f"cron expression {self.expression!r}: no fire found before {before_ms}")

    def next_fires(self, after_ms: int, count: int) -> list[int]:
        """The `count` fires after `after_ms`, in order."""
        fires: list[int] = []
        for _ in range(count):
            after_ms = self.next_after(after_ms)
            fires.append(after_ms)
        return fires

    def _next(self, candidates: CronSim) -> datetime:
        try:
            return next(candidates)
        except StopIteration:
            raise CronError(
                f"cron expression {self.expression!r} never fires within 50 years; check its "
                "day and month fields"
            ) from None


@lru_cache(maxsize=4096)
def parse_cron(expression: str, time_zone: str = "UTC") -> Cron:
    """Parse `expression` for the zone `time_zone`; CronError or ScheduleError says what is
    wrong and how to write it."""
    zone(time_zone)
    return Cron(expression=expression, time_zone=time_zone, fields=normalize(expression))
