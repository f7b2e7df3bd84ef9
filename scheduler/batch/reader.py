"""Reading fields of a configuration while collecting every problem, instead of stopping at the
first one: the seed's parser stops at the first, so a file with three mistakes took three tries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.batch.durations import Duration, parse_duration, parse_partition
from scheduler.batch.errors import Problem


class Reader:
    """Reads typed fields out of parsed JSON; each wrong field adds a Problem and reads as None."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.job: str | None = None
        """The name of the job being read, given to its problems."""
        self.names: list[tuple[str, str]] = []
        """(path, name) of every job name read, for the duplicate check."""
        self.references: list[tuple[str, str | None, str]] = []
        """(path, job, named job) of every dependency, for the unknown-name check."""

    def problem(self, path: str, message: str, job: str | None = None) -> None:
        self.problems.append(Problem(path, message, job if job is not None else self.job))

    def only(self, data: Mapping[str, Any], path: str, known: Sequence[str]) -> None:
        """A problem for each key of `data` not in `known` (a misspelt optional field)."""
        for key in data:
            if key not in known:
                self.problem(_at(path, str(key)), "is not a field here; check its spelling")

    def _get(self, data: Mapping[str, Any], path: str, key: str, what: str) -> Any:
        if key not in data:
            self.problem(_at(path, key), f"is missing; give {what}")
        return data.get(key)

    def string(
        self, data: Mapping[str, Any], path: str, key: str, *, required: bool = True
    ) -> str | None:
        if key not in data and not required:
            return None
        value = self._get(data, path, key, "a non-empty string")
        if key in data and (not isinstance(value, str) or not value):
            self.problem(_at(path, key), f"{value!r} is not a non-empty string")
            return None
        return value if isinstance(value, str) else None

    def count(
        self, data: Mapping[str, Any], path: str, key: str, *, minimum: int = 0
    ) -> int | None:
        value = self._get(data, path, key, f"an integer, {minimum} or more")
        if key not in data:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.problem(_at(path, key), f"{value!r} is not an integer {minimum} or more")
            return None
        return value

    def number(self, data: Mapping[str, Any], path: str, key: str, minimum: float) -> float | None:
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            self.problem(_at(path, key), f"{value!r} is not a number, {minimum} or more")
            return None
        return float(value)

    def duration(
        self,
        data: Mapping[str, Any],
        path: str,
        key: str,
        *,
        signed: bool = False,
        nonzero: bool = False,
    ) -> Duration | None:
        value = self._get(data, path, key, "a duration such as '1 hours'")
        if key not in data:
            return None
        try:
            duration = parse_duration(value, signed=signed)
        except ValueError as error:
            self.problem(_at(path, key), str(error))
            return None
        if nonzero and duration.is_zero:
            self.problem(_at(path, key), f"{value!r} is zero; give a positive duration")
            return None
        return duration

    def partition(self, data: Mapping[str, Any], path: str, key: str) -> int | None:
        value = self._get(data, path, key, "a date 'yyyy-MM-dd HH:mm:ss' (UTC)")
        if key not in data:
            return None
        try:
            return parse_partition(value)
        except ValueError as error:
            self.problem(_at(path, key), str(error))
            return None

    def array(self, data: Mapping[str, Any], path: str, key: str) -> list[Any] | None:
        value = self._get(data, path, key, "a list (it may be empty)")
        if key in data and not isinstance(value, list):
            self.problem(_at(path, key), f"{value!r} is not a list; write [...] (it may be empty)")
            return None
        return value if isinstance(value, list) else None

    def command(self, data: Mapping[str, Any], path: str, key: str) -> tuple[str, ...] | None:
        value = data.get(key)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.problem(
                _at(path, key), f'{value!r} is not a list of strings; write ["/bin/echo", "hi"]'
            )
            return None
        if not value or not value[0]:
            self.problem(
                _at(path, key),
                "is empty; give the program to run and its arguments, e.g. "
                '["/bin/echo", "[[partition]]"] (run as argv, never through a shell)',
            )
            return None
        return tuple(value)

    def string_map(self, data: Mapping[str, Any], path: str, key: str) -> dict[str, str]:
        value = data.get(key)
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            self.problem(_at(path, key), f'{value!r} is not an object of strings: {{"a": "b"}}')
            return {}
        return dict(value)


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
