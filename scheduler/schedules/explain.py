"""Pydantic's validation errors told as the product tells errors: each wrong field by its path
(``trigger.triggers[1].numPartitions``) and what to write instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from scheduler.schedules.errors import ScheduleError

_TAGS = frozenset(
    {"TIME", "PARTITION", "PROGRAM_STATUS", "AND", "OR"}
    | {"CONCURRENCY", "DELAY", "TIME_RANGE", "LAST_RUN"}
)
_HINTS = {
    "name": "letters, digits, '.', '_' and '-', starting with a letter or digit",
    "program": "the name of a declared program",
    "cronExpression": "a cron expression such as '0 4 * * *'",
    "numPartitions": "how many partitions must land before the job goes on: 1 or more",
    "programStatuses": "a list of COMPLETED, FAILED and KILLED",
    "maxConcurrency": "the most runs that may be active at once: 1 or more",
    "millisAfterTrigger": "milliseconds after the job's first event: 1 or more",
    "millisSinceLastRun": "milliseconds since the last completed run ended: 1 or more",
    "timeoutMillis": "milliseconds a job may wait from its first event: 1 or more",
    "triggers": "a list of one or more triggers",
    "trigger": "an object with a type: TIME, PARTITION, PROGRAM_STATUS, AND or OR",
}


def _path(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part not in _TAGS:
            text += f".{part}" if text else part
    return text or "the schedule"


def _field_problem(item: Mapping[str, Any]) -> tuple[str, str]:
    """The path of one of pydantic's errors and its problem (with a hint where one helps)."""
    loc = tuple(item["loc"])
    kind, context = item["type"], item.get("ctx") or {}
    names = [part for part in loc if isinstance(part, str) and part not in _TAGS]
    hint = _HINTS.get(names[-1]) if names and not isinstance(loc[-1], int) else None
    if kind == "union_tag_invalid":
        tags = context.get("expected_tags")
        return _path(loc), f"type {context.get('tag')!r} is unknown; use one of {tags}"
    if kind == "union_tag_not_found":
        kinds = (
            "CONCURRENCY, DELAY, TIME_RANGE or LAST_RUN"
            if names[-1:] == ["constraints"]
            else ("TIME, PARTITION, PROGRAM_STATUS, AND or OR")
        )
        return _path(loc), f"has no 'type'; add one of {kinds}"
    if kind == "value_error":
        return _path(loc), str(context.get("error"))
    if kind == "extra_forbidden":
        message = "is not a field here; check its spelling"
    else:
        message = item["msg"][0].lower() + item["msg"][1:]
    return _path(loc), message + (f" ({hint})" if hint else "")


def _innermost(errors: list[Any]) -> list[Any]:
    """The errors without those of a container whose items failed: a list whose only item is
    invalid is also reported as too short, which says nothing the item's error does not."""
    locs = [tuple(error["loc"]) for error in errors]
    return [
        error
        for error, loc in zip(errors, locs, strict=True)
        if not any(len(other) > len(loc) and other[: len(loc)] == loc for other in locs)
    ]


def explain(error: ValidationError, what: str) -> ScheduleError:
    """One ScheduleError that lists every problem of `error`, about `what` ("schedule 'x'")."""
    fields = [_field_problem(item) for item in _innermost(error.errors())]
    problems = "\n  ".join(f"{path}: {problem}" for path, problem in fields)
    return ScheduleError(f"{what} is not valid:\n  {problems}", fields)
