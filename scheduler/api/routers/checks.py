"""`/api/v1/checks`: check a schedule or a batch-job configuration before handing it over.

The same checks their engines apply, open to a `read` token, so a tool can validate what it is
about to submit (`/api/v1/schedules` and `/api/v1/batch` then create and load it). Nothing is
stored or changed.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, Field

from scheduler.api.auth import Role, TokenEntry
from scheduler.api.deps import require
from scheduler.api.errors import ERROR_RESPONSES, FieldProblem, error_response
from scheduler.batch import BatchConfigError, parse_configuration
from scheduler.schedules.parse import parse_schedule

router = APIRouter(prefix="/api/v1/checks", tags=["checks"], responses=ERROR_RESPONSES)
Reader = Annotated[TokenEntry, Depends(require(Role.READ))]
AnyObject = Annotated[dict[str, Any], Body(description="The JSON object to check.")]


class BatchChecked(BaseModel):
    """A batch configuration that passed every check."""

    jobs: list[str] = Field(description="The names of its jobs, in file order.")
    max_parallelism: int


class ScheduleChecked(BaseModel):
    """A schedule that passed every check, as the engine reads it (defaults filled in)."""

    schedule: dict[str, Any]


@router.post("/batch-configuration", summary="Check a batch-job configuration")
def check_batch(body: AnyObject, _: Reader) -> Any:
    """The seed's configuration file (docs/batch-jobs.md): 200 with its jobs when it is valid,
    else 400 listing every problem at once, each with its JSON path."""
    try:
        configuration = parse_configuration(body)
    except BatchConfigError as error:
        problems = [
            FieldProblem(field=f"body.{p.path}" if p.path else "body", problem=p.message)
            for p in error.problems
        ]
        return error_response(400, str(error), problems)
    return BatchChecked(
        jobs=[job.name for job in configuration.jobs],
        max_parallelism=configuration.max_parallelism,
    )


@router.post("/schedule", summary="Check a schedule")
def check_schedule(body: AnyObject, _: Reader) -> Any:
    """A schedule in the seeds' JSON (docs/schedules.md): 200 with it as the engine reads it,
    else 400 naming each wrong field and what to write instead."""
    # A ScheduleError is answered by the app's handler, as when a schedule is created.
    return ScheduleChecked(schedule=parse_schedule(body).to_json())
