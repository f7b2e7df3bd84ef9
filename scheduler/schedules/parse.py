"""Reading a schedule from its JSON; errors name each wrong field by its path and say what to
write instead."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from scheduler.schedules.errors import ScheduleError
from scheduler.schedules.explain import explain
from scheduler.schedules.model import Schedule


def parse_schedule(data: str | bytes | Mapping[str, Any]) -> Schedule:
    """A Schedule from its JSON (text or parsed); ScheduleError lists every field that is wrong,
    by its path (``trigger.triggers[1].numPartitions``), and what to write instead."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as error:
            raise ScheduleError(f"a schedule must be JSON: {error}") from None
    if not isinstance(data, Mapping):
        raise ScheduleError(f"a schedule must be a JSON object, got {type(data).__name__}")
    try:
        return Schedule.model_validate(data)
    except ValidationError as error:
        name = data.get("name")
        raise explain(
            error, f"schedule {name!r}" if isinstance(name, str) else "the schedule"
        ) from None
