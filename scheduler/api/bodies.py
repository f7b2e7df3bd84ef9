"""The body of `POST /api/v1/tasks/batch`, parsed fast: orjson, then each task checked by hand
and built straight into a `Task`, instead of the stdlib's JSON and a pydantic model per task.

The fast path only takes what is certainly valid: an object `{"tasks": [...]}` of 1 to 10,000
objects whose keys are exactly the schema's, strings where strings belong, an object for `data`
and a time in the plain ISO 8601 form (`2027-01-31T14:00:00Z`, `...00.123+02:00`) with a zone.
Anything else (a number for a time, an unknown key, a missing field, JSON that orjson refuses
but the stdlib takes) goes the way FastAPI would have gone: the stdlib's JSON and `TasksIn`, so
a body the fast path does not take is accepted or refused exactly as before, with the same
field-naming 400.
"""

from __future__ import annotations

import email.message
import json
import re
from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from scheduler.api.schemas import TasksIn
from scheduler.model import MAX_KEY_BYTES, Task, TaskKey

MAX_TASKS = 10_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SHORT = MAX_KEY_BYTES // 4  # no str this long is longer in UTF-8
_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})", re.ASCII
)


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI would parse a body of this content type as JSON."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def _decode(raw: bytes, content_type: str | None) -> tuple[Any, bool]:
    """The body's value as FastAPI would hand it to validation, and whether orjson read it."""
    if not raw:
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}]
        )
    if not _is_json(content_type):
        return raw, False
    try:
        return orjson.loads(raw), True
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw), False
    except json.JSONDecodeError as error:
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", error.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": error.msg},
                }
            ]
        ) from error


def _fast(value: Any) -> list[Task] | None:
    """The tasks of `value` if every one is certainly valid, else None.

    The checks are `Task`'s and `TaskKey`'s, inlined, and the tasks are built from their checked
    parts (`TaskKey.from_ms`, `Task.from_key`): at 1,000 tasks a request the calls of the checked
    constructors cost more than the JSON parse. A part the inline checks doubt (a NUL, a blank,
    a long key) sends the body the slow way, whose errors name the field."""
    if type(value) is not dict or len(value) != 1:
        return None
    items = value.get("tasks")
    if type(items) is not list or not 1 <= len(items) <= MAX_TASKS:
        return None
    tasks: list[Task] = []
    append, key_from_ms, task_from_key = tasks.append, TaskKey.from_ms, Task.from_key
    # A batch's tasks often share their times (a backfill's hour, a fan-out's instant): each
    # distinct time string is checked and read once.
    times: dict[str, int] = {}
    seen_time = times.get
    for item in items:
        # Three keys that are the required ones, or four that are all of them: nothing else.
        if type(item) is not dict or not 3 <= len(item) <= 4:
            return None
        try:
            ordering_id, when = item["ordering_id"], item["scheduled_time"]
            key, data = item["uniqueness_key"], item["data"] if len(item) == 4 else {}
        except KeyError:
            return None
        if type(ordering_id) is not str or type(key) is not str or type(data) is not dict:
            return None
        if not _plain(ordering_id) or not _plain(key):
            return None
        if type(when) is not str:
            return None
        ms = seen_time(when)
        if ms is None:
            ms = _epoch_ms(when)
            if ms is None:
                return None
            times[when] = ms
        append(task_from_key(key_from_ms(ordering_id, ms, key), data))
    return tasks


def _epoch_ms(when: str) -> int | None:
    """Epoch milliseconds of a time in the plain ISO 8601 form with a zone, else None."""
    if _TIME.fullmatch(when) is None:
        return None
    try:
        delta = datetime.fromisoformat(when) - _EPOCH
    except (ValueError, TypeError):  # TypeError: no zone after all
        return None
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _plain(part: str) -> bool:
    """Whether `check_key_part` certainly takes `part` (a str)."""
    return (
        "\x00" not in part
        and (len(part) <= _SHORT or len(part.encode("utf-8")) <= MAX_KEY_BYTES)
        and not part.isspace()
        and part != ""
    )


def parse_tasks(raw: bytes, content_type: str | None) -> list[Task]:
    """The tasks of a batch body; `RequestValidationError` (a 400 naming each field) if it is not
    what `TasksIn` says."""
    value, fast = _decode(raw, content_type)
    if fast:
        tasks = _fast(value)
        if tasks is not None:
            return tasks
    try:
        body = TasksIn.model_validate(value)
    except ValidationError as error:
        raise RequestValidationError(
            [{**problem, "loc": ("body", *problem["loc"])} for problem in error.errors()]
        ) from None
    return [Task(t.ordering_id, t.scheduled_time, t.uniqueness_key, t.data) for t in body.tasks]
