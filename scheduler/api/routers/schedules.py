"""`/api/v1/schedules`: the schedules' lifecycle with the seeds' REST semantics, on
`scheduler.schedules.client.SchedulesClient` (the same checks and waits as `scheduler
schedules`).

* `PUT /schedules/{name}` creates (disabled); the body's `name`, when given, must be the path's
  (400 otherwise); an existing name is a 409.
* `POST /schedules/{name}/update` changes the fields given (the others keep their value).
* `POST /schedules/{name}/enable|disable`: 409 when the schedule is so already.
* `DELETE /schedules/{name}`; an unknown name is a 404 everywhere.
* `POST /schedules/re-enable` enables the schedules disabled within a time range.

A change answers once a worker applied it (503 if none did within 30 s: the change stays sent
and applies when a worker runs).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Response

from scheduler.admin import iso
from scheduler.api.auth import Role, TokenEntry
from scheduler.api.deps import api_state, require
from scheduler.api.errors import ERROR_RESPONSES, ErrorBody
from scheduler.api.listing_json import json_response
from scheduler.api.schemas import (
    ReenabledOut,
    ReenableIn,
    RunTimesOut,
    ScheduleJobOut,
    ScheduleOut,
)
from scheduler.api.state import ApiState
from scheduler.schedules.abc import ListedSchedule, ScheduleRecord
from scheduler.schedules.errors import ScheduleError
from scheduler.schedules.parse import parse_schedule
from scheduler.schedules.waiting import waiting_on

_404: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such schedule."}
}
_409: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "The schedule's state does not fit the change."}
}
_503: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "Sent, but no worker applied it in time."}
}

router = APIRouter(prefix="/api/v1", tags=["schedules"], responses=ERROR_RESPONSES)
State = Annotated[ApiState, Depends(api_state)]
Reader = Annotated[TokenEntry, Depends(require(Role.READ))]
Operator = Annotated[TokenEntry, Depends(require(Role.OPERATE))]
Admin = Annotated[TokenEntry, Depends(require(Role.ADMIN))]
ScheduleBody = Annotated[
    dict[str, Any],
    Body(
        description="A schedule in the seeds' ScheduleDetail shape (docs/schedules.md): "
        "program, trigger, constraints, properties, timeoutMillis, timeZone, catchUp.",
        examples=[
            {
                "name": "hourly",
                "program": {"programName": "clean"},
                "trigger": {"type": "TIME", "cronExpression": "5 * * * *"},
            }
        ],
    ),
]


def _out(record: ScheduleRecord) -> ScheduleOut:
    return _listed_out(ListedSchedule.of(record))


def _listed_out(listed: ListedSchedule) -> ScheduleOut:
    return ScheduleOut.model_validate(_listed_json(listed))


def _listed_json(listed: ListedSchedule) -> dict[str, Any]:
    """`ScheduleOut`'s JSON of `listed`, field for field."""
    return {
        "name": listed.name,
        "status": listed.status,
        "trigger_type": listed.trigger_type,
        "program": listed.program,
        "revision": listed.revision,
        "created_time": iso(listed.created_ms) if listed.created_ms else None,
        "updated_time": iso(listed.updated_ms) if listed.updated_ms else None,
        "disabled_time": None if listed.disabled_ms is None else iso(listed.disabled_ms),
        "next_fire_times": sorted(iso(ms) for ms in listed.next_fires.values()),
        "source": listed.source,
        "schedule": listed.schedule,
    }


@router.get("/schedules", summary="List schedules", response_model=list[ScheduleOut])
def list_schedules(
    state: State,
    _: Reader,
    trigger_type: Annotated[
        str | None,
        Query(description="Only this trigger type: TIME, PARTITION, PROGRAM_STATUS, AND, OR."),
    ] = None,
    status: Annotated[
        str | None, Query(description="Only schedules in this status: ENABLED or DISABLED.")
    ] = None,
    after: Annotated[str, Query(description="Names after this one (the page's last).")] = "",
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 100,
) -> Response:
    """Schedules by name, a page at a time, filtered in the store."""
    if status is not None and status.upper() not in ("ENABLED", "DISABLED"):
        raise ScheduleError(f"status {status!r} is not a schedule status: use ENABLED or DISABLED")
    # Read as the stored JSON (`ListedSchedule`), not decoded and re-checked: a page is cheap.
    listed = state.schedules().store.list_listed(
        trigger_type=None if trigger_type is None else trigger_type.upper(),
        status=None if status is None else status.upper(),
        after=after,
        limit=limit,
    )
    # The page's JSON is written once, not checked again (scheduler/api/listing_json.py).
    return json_response([_listed_json(one) for one in listed])


@router.post(
    "/schedules/re-enable",
    summary="Re-enable the schedules disabled in a time range",
    responses=_503,
)
def reenable(body: ReenableIn, state: State, _: Operator) -> ReenabledOut:
    """Enable every schedule disabled within [start_time, end_time), as after an outage."""
    start, end = int(body.start_time.timestamp() * 1000), int(body.end_time.timestamp() * 1000)
    if end <= start:
        raise ScheduleError("end_time must be after start_time (the range is [start, end))")
    return ReenabledOut(enabled=state.schedules().reenable(start, end))


@router.get("/schedules/{name}", summary="Get a schedule", responses=_404)
def get_schedule(name: str, state: State, _: Reader) -> ScheduleOut:
    """One schedule: its definition, status, revision and next fires."""
    return _out(state.schedules().get(name))


@router.put(
    "/schedules/{name}",
    status_code=201,
    summary="Create a schedule",
    responses={**_409, **_503},
)
def create_schedule(name: str, body: ScheduleBody, state: State, caller: Admin) -> ScheduleOut:
    """Create the schedule, disabled. The body's `name` may be left out; given, it must be the
    path's."""
    given = body.get("name", name)
    if given != name:
        raise ScheduleError(
            f"the body names schedule {given!r} but the path {name!r}: they must be the same "
            "(or leave `name` out of the body)"
        )
    client = state.schedules()
    client.create(parse_schedule({**body, "name": name}), source=f"api:{caller.name}")
    return _out(client.get(name))


@router.post(
    "/schedules/{name}/update",
    summary="Change a schedule",
    responses={**_404, **_503},
)
def update_schedule(name: str, body: ScheduleBody, state: State, _: Admin) -> ScheduleOut:
    """Change the fields given; the others keep their value. The program cannot change. Open
    jobs of the old definition end OBSOLETE; the status stays."""
    if body.get("name", name) != name:
        raise ScheduleError(f"an update cannot rename schedule {name!r} to {body['name']!r}")
    client = state.schedules()
    client.update(name, body)
    return _out(client.get(name))


@router.post(
    "/schedules/{name}/enable", summary="Enable a schedule", responses={**_404, **_409, **_503}
)
def enable_schedule(name: str, state: State, _: Operator) -> ScheduleOut:
    """Fires from now on start jobs; 409 if it is enabled already."""
    client = state.schedules()
    client.enable(name)
    return _out(client.get(name))


@router.post(
    "/schedules/{name}/disable", summary="Disable a schedule", responses={**_404, **_409, **_503}
)
def disable_schedule(name: str, state: State, _: Operator) -> ScheduleOut:
    """No more fires; its open jobs end OBSOLETE. 409 if it is disabled already."""
    client = state.schedules()
    client.disable(name)
    return _out(client.get(name))


@router.delete(
    "/schedules/{name}", status_code=204, summary="Delete a schedule", responses={**_404, **_503}
)
def delete_schedule(name: str, state: State, _: Admin) -> Response:
    """Delete it; its open jobs end OBSOLETE (a job already launching keeps its launch)."""
    state.schedules().delete(name)
    return Response(status_code=204)


@router.get("/schedules/{name}/next-runs", summary="Next run times", responses=_404)
def next_runs(
    name: str,
    state: State,
    _: Reader,
    count: Annotated[int, Query(ge=1, le=100, description="How many.")] = 5,
) -> RunTimesOut:
    """The next fire times of the schedule's TIME triggers (none without one)."""
    fires = state.schedules().next_runs(name, count)
    return RunTimesOut(name=name, times=[iso(ms) for ms in fires])


@router.get("/schedules/{name}/previous-runs", summary="Previous run times", responses=_404)
def previous_runs(
    name: str,
    state: State,
    _: Reader,
    count: Annotated[int, Query(ge=1, le=100, description="How many.")] = 5,
) -> RunTimesOut:
    """The last fire times of the schedule's TIME triggers before now, newest first."""
    fires = state.schedules().previous_runs(name, count)
    return RunTimesOut(name=name, times=[iso(ms) for ms in fires])


@router.get("/schedules/{name}/jobs", summary="A schedule's jobs", responses=_404)
def schedule_jobs(name: str, state: State, _: Reader) -> list[ScheduleJobOut]:
    """The schedule's jobs: what each has collected and, for one that waits, why; a launched
    job's run, with its status."""
    jobs = state.schedules().jobs(name)
    runs = state.run_store().get_many([job.run_id for job in jobs if job.run_id is not None])
    return [
        ScheduleJobOut(
            job_key=job.key,
            state=str(job.state),
            revision=job.revision,
            first_event_time=None if job.first_event_ms is None else iso(job.first_event_ms),
            events=len(job.events),
            waiting_for=waiting_on(job),
            reason=job.reason or "",
            run_id=job.run_id,
            run_status=str(runs[job.run_id].status) if job.run_id in runs else None,
        )
        for job in jobs
    ]


@router.get("/programs/{program}/schedules", summary="Schedules a program's runs trigger")
def triggered_by(program: str, state: State, _: Reader) -> list[ScheduleOut]:
    """The schedules with a PROGRAM_STATUS trigger on `program`."""
    return [_out(record) for record in state.schedules().triggered_by(program)]
