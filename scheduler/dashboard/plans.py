"""The dashboard's schedules and batch-jobs pages, with the actions each role may take.

Reads and actions go through what the REST API uses (`SchedulesClient`, `BatchJobs`, from
`ApiState`), with the API's roles: operate enables, disables, re-runs, pauses and resumes; admin
deletes schedules. Every list is a page read from the store: schedules by name after `after`,
a job's partitions from index `first`, both filtered there.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from scheduler.admin import iso
from scheduler.api.auth import Role, TokenEntry
from scheduler.attempts import error_summary
from scheduler.batch.durations import format_partition
from scheduler.batch.state import Status
from scheduler.dashboard.pages import (
    PAGE_SIZE,
    _form,
    _message,
    _render,
    _state,
    _to_login,
    _viewer,
)
from scheduler.errors import SchedulerError
from scheduler.schedules.job import OPEN_STATES
from scheduler.schedules.model import describe
from scheduler.schedules.waiting import waiting_on

router = APIRouter(prefix="/dashboard", include_in_schema=False)
TRIGGER_TYPES = ("TIME", "PARTITION", "PROGRAM_STATUS", "AND", "OR")
SCHEDULE_ROLES = {"enable": Role.OPERATE, "disable": Role.OPERATE, "delete": Role.ADMIN}
BATCH_ROLES = {"rerun": Role.OPERATE, "pause": Role.OPERATE, "resume": Role.OPERATE}


def _refused(request: Request, viewer: TokenEntry, verb: str, needed: Role) -> Response | None:
    if viewer.role.allows(needed):
        return None
    return _message(
        request,
        403,
        f"refused: {verb} needs the {needed} role, and token {viewer.name!r} has the "
        f"{viewer.role} role",
    )


# -- schedules ------------------------------------------------------------------------------


@router.get("/schedules", response_model=None)
def schedules_page(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "schedules.html", viewer=viewer, **_schedules_context(request))


@router.get("/schedules/body", response_model=None)
def schedules_body(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "schedules_body.html", viewer=viewer, **_schedules_context(request))


def _schedules_context(request: Request) -> dict[str, Any]:
    params = request.query_params
    status = params.get("status", "").upper()
    status = status if status in ("ENABLED", "DISABLED") else ""
    trigger = params.get("trigger_type", "").upper()
    trigger = trigger if trigger in TRIGGER_TYPES else ""
    after = params.get("after", "")
    client = _state(request).schedules()
    records = client.list_schedules(
        trigger_type=trigger or None, status=status or None, after=after, limit=PAGE_SIZE
    )
    rows = []
    for record in records:
        jobs = [job for job in client.store.jobs(record.name) if job.state in OPEN_STATES]
        rows.append(
            {
                "name": record.name,
                "program": record.schedule.program,
                "trigger_type": record.trigger_type,
                "trigger": describe(record.schedule.trigger, record.schedule.time_zone),
                "status": record.status,
                "enabled": record.enabled,
                "next": sorted(iso(ms) for ms in record.next_fires.values()),
                "last": sorted((iso(ms) for ms in record.last_fires.values()), reverse=True),
                "waiting": [
                    {"state": str(job.state), "on": waiting_on(job), "events": len(job.events)}
                    for job in jobs
                ],
            }
        )
    filters = {k: v for k, v in (("status", status), ("trigger_type", trigger)) if v}
    following = ""
    if len(records) >= PAGE_SIZE:
        following = urlencode({**filters, "after": records[-1].name})
    return {
        "schedules": rows,
        "wanted_status": status,
        "trigger_type": trigger,
        "trigger_types": TRIGGER_TYPES,
        "query": urlencode({**filters, "after": after} if after else filters),
        "following": following,
        "roles": SCHEDULE_ROLES,
    }


@router.post("/schedules/act", response_model=None)
async def schedule_action(request: Request) -> Response:
    """Enable, disable or delete one schedule, confirmed in the page; a message for its banner."""
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    form = await _form(request)
    verb, name = form.get("verb", ""), form.get("name", "")
    if verb not in SCHEDULE_ROLES:
        return _message(
            request, 400, f"{verb!r} is not an action; use one of {sorted(SCHEDULE_ROLES)}"
        )
    refused = _refused(request, viewer, verb, SCHEDULE_ROLES[verb])
    if refused is not None:
        return refused
    client = _state(request).schedules()
    try:
        await run_in_threadpool(getattr(client, verb), name)
    except SchedulerError as error:
        return _message(request, 409, str(error))
    return _message(request, 200, f"schedule {name} {verb}d")


# -- batch jobs -----------------------------------------------------------------------------


@router.get("/batch", response_model=None)
def batch_page(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "batch.html", viewer=viewer, **_batch_context(request))


@router.get("/batch/body", response_model=None)
def batch_body(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "batch_body.html", viewer=viewer, **_batch_context(request))


def _batch_context(request: Request) -> dict[str, Any]:
    params = request.query_params
    wanted = params.get("status", "").upper()
    statuses = {Status(wanted)} if wanted in {s.value for s in Status} else None
    try:
        first = max(0, int(params.get("first", "0")))
    except ValueError:
        first = 0
    jobs = _state(request).batch_jobs()
    context: dict[str, Any] = {
        "wanted_status": wanted if statuses else "",
        "statuses": [s.value for s in Status],
        "first": first,
        "page_size": PAGE_SIZE,
        "roles": BATCH_ROLES,
        "query": urlencode({k: v for k, v in (("status", wanted), ("first", first)) if v}),
    }
    if jobs.stored() is None:
        return {**context, "loaded": False, "jobs": []}
    shown = []
    for row in jobs.jobs():
        views = jobs.partitions(row.name, statuses=statuses, first=first, limit=PAGE_SIZE)
        cells = [
            {
                "name": format_partition(view.partition),
                "ms": view.partition,
                "status": str(view.status),
                "why": "; ".join(view.waiting_for) or error_summary(view.reason) or "",
                "attempts": view.attempts,
            }
            for view in views
        ]
        shown.append({"row": row, "cells": cells})
    return {**context, "loaded": True, "jobs": shown}


@router.post("/batch/act", response_model=None)
async def batch_action(request: Request) -> Response:
    """Re-run one partition, pause or resume a job, confirmed in the page."""
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    form = await _form(request)
    verb, job = form.get("verb", ""), form.get("job", "")
    if verb not in BATCH_ROLES:
        return _message(
            request, 400, f"{verb!r} is not an action; use one of {sorted(BATCH_ROLES)}"
        )
    refused = _refused(request, viewer, verb, BATCH_ROLES[verb])
    if refused is not None:
        return refused
    jobs = _state(request).batch_jobs()
    try:
        if verb == "rerun":
            partition = int(form.get("partition", ""))
            await run_in_threadpool(jobs.rerun, job, partition, partition + 1)
            return _message(
                request, 200, f"re-run of {job} {format_partition(partition)} requested"
            )
        await run_in_threadpool(getattr(jobs, verb), job)
    except (SchedulerError, ValueError) as error:
        return _message(request, 409, str(error))
    return _message(request, 200, f"{verb} of {job} requested")
