"""The dashboard's pages: login, the fleet, the tasks of an ordering id and the runs of programs,
with the actions each role may take.

Pages are whole HTML documents; the live parts (`.../body`) are fragments that htmx fetches
every few seconds and swaps in place. Every read and every action goes through what the REST API
uses (`scheduler.fleet.status`, `scheduler.admin`), with the same roles (`CHANGE_ROLES`).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from scheduler.admin import (
    check_changes,
    iso,
    list_page,
    partition_of,
    request_changes,
    status_dict,
)
from scheduler.api.auth import CHANGE_ROLES, Role, TokenEntry
from scheduler.api.routers.fleet import fleet
from scheduler.api.state import ApiState
from scheduler.attempts import error_summary
from scheduler.dashboard.sparkline import sparkline
from scheduler.engine.clock import now_ms
from scheduler.errors import SchedulerError
from scheduler.model import TaskKey, TaskState, from_epoch_ms
from scheduler.programs import operator
from scheduler.programs.abc import run_cursor
from scheduler.programs.cursor import decode_run_cursor, encode_run_cursor
from scheduler.programs.model import RunStatus, StarterKind

COOKIE = "scheduler_session"
PAGE_SIZE = 100

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
templates.env.globals["CHANGE_ROLES"] = CHANGE_ROLES
# A table cell shows the useful part of an error first (the whole text is its title).
templates.env.filters["error_summary"] = lambda error: error_summary(error) or ""
router = APIRouter(prefix="/dashboard", include_in_schema=False)


def _state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


def _viewer(request: Request) -> TokenEntry | None:
    session_id = request.cookies.get(COOKIE)
    if not session_id:
        return None
    state = _state(request)
    entry = state.sessions.get(session_id)
    if entry is None or state.tokens.current(entry) is None:
        return None
    return entry


def _to_login(request: Request) -> Response:
    if request.headers.get("HX-Request"):
        return Response(status_code=401, headers={"HX-Redirect": "/dashboard/login"})
    return RedirectResponse("/dashboard/login", status_code=303)


def _render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=status)


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form (no multipart: the dashboard posts nothing else)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {name: values[0] for name, values in parse_qs(body).items()}


@router.get("/login")
def login_page(request: Request) -> HTMLResponse:
    return _render(request, "login.html", error=None)


@router.post("/login", response_model=None)
async def login(request: Request) -> Response:
    token = (await _form(request)).get("token", "").strip()
    state = _state(request)
    entry = state.tokens.verify(token) if token else None
    if entry is None:
        message = (
            "That is not a token of this API: paste one made with `scheduler api tokens create`."
        )
        return _render(request, "login.html", status=401, error=message)
    response = RedirectResponse("/dashboard", status_code=303)
    response.set_cookie(
        COOKIE,
        state.sessions.open(entry),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/dashboard",
    )
    return response


@router.post("/logout")
def logout(request: Request) -> RedirectResponse:
    session_id = request.cookies.get(COOKIE)
    if session_id:
        _state(request).sessions.close(session_id)
    response = RedirectResponse("/dashboard/login", status_code=303)
    response.delete_cookie(COOKIE, path="/dashboard")
    return response


@router.get("", response_model=None)
def fleet_page(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "fleet.html", viewer=viewer, **_fleet_context(request))


@router.get("/fleet/body", response_model=None)
def fleet_body(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "fleet_body.html", viewer=viewer, **_fleet_context(request))


def _fleet_context(request: Request) -> dict[str, Any]:
    state = _state(request)
    group = fleet(state)
    samples = state.history.samples()
    return {
        "fleet": group,
        "now": iso(int(samples[-1].at * 1000)) if samples else None,
        "throughput": sparkline(state.history.throughput(), label="records committed per second"),
        "lag_line": sparkline([s.lag for s in samples], label="lag"),
        "overdue_line": sparkline([s.overdue for s in samples], label="overdue tasks"),
    }


@router.get("/tasks", response_model=None)
def tasks_page(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "tasks.html", viewer=viewer, **_tasks_context(request))


@router.get("/tasks/body", response_model=None)
def tasks_body(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "tasks_body.html", viewer=viewer, **_tasks_context(request))


def _tasks_context(request: Request) -> dict[str, Any]:
    state = _state(request)
    ordering_id = request.query_params.get("ordering_id", "").strip() or None
    wanted = request.query_params.get("state", "").strip().lower() or None
    states = {TaskState(wanted)} if wanted in {s.value for s in TaskState} else None
    # One ordering id reads its partition; none reads every partition in order (what failed,
    # across the fleet), as `GET /api/v1/tasks` does, the first page only.
    if ordering_id is not None:
        partitions = [partition_of(ordering_id, state.settings.partitions)]
    else:
        partitions = list(range(state.settings.partitions))
    views, more = list_page(
        state.store, partitions, ordering_id=ordering_id, states=states, limit=PAGE_SIZE
    )
    query = urlencode(
        {k: v for k, v in (("ordering_id", ordering_id), ("state", wanted if states else "")) if v}
    )
    return {
        "ordering_id": ordering_id,
        "state": wanted if states else "",
        "states": [s.value for s in TaskState],
        "tasks": [status_dict(view) for view in views],
        "more": more,
        "page_size": PAGE_SIZE,
        "query": query,
    }


_ACTION_STATES = {
    "cancel": {"pending", "running", "retrying"},
    "retry": {"failed"},
    "rerun": {"succeeded", "failed", "cancelled"},
    "drop": {"failed"},
}
templates.env.globals["ACTION_STATES"] = _ACTION_STATES


@router.post("/tasks/action", response_model=None)
async def task_action(request: Request) -> Response:
    """One change to one task, confirmed in the page; the answer is a message for its banner."""
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    form = await _form(request)
    verb = form.get("verb", "")
    if verb not in CHANGE_ROLES:
        return _message(
            request, 400, f"{verb!r} is not an action; use one of {sorted(CHANGE_ROLES)}"
        )
    needed = CHANGE_ROLES[verb]
    if not viewer.role.allows(needed):
        return _message(
            request,
            403,
            f"refused: {verb} needs the {needed} role, and token {viewer.name!r} has the "
            f"{viewer.role} role",
        )
    try:
        key = TaskKey(
            form["ordering_id"], from_epoch_ms(int(form["scheduled_ms"])), form["uniqueness_key"]
        )
    except (KeyError, ValueError, OverflowError, OSError):
        return _message(request, 400, "the action names no task; reload the page and try again")
    state = _state(request)
    try:
        check_changes(state.store, state.settings.partitions, [key], verb)
        request_changes(state.client, [key], verb)
    except SchedulerError as error:
        return _message(request, 409, str(error))
    return _message(
        request, 200, f"{verb} requested for {key.uniqueness_key} at {iso(key.scheduled_ms)}"
    )


def _message(request: Request, status: int, text: str) -> HTMLResponse:
    kind = "ok" if status < 400 else "refused"
    return _render(request, "message.html", status=status, kind=kind, text=text)


@router.get("/runs", response_model=None)
def runs_page(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "runs.html", viewer=viewer, **_runs_context(request))


@router.get("/runs/body", response_model=None)
def runs_body(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    return _render(request, "runs_body.html", viewer=viewer, **_runs_context(request))


def _runs_context(request: Request) -> dict[str, Any]:
    state = _state(request)
    params = request.query_params
    program = params.get("program", "").strip() or None
    wanted = params.get("status", "").strip().upper()
    statuses = {RunStatus(wanted)} if wanted in {s.value for s in RunStatus} else None
    size = _page_size(params.get("size", ""))
    cursor = params.get("cursor", "").strip()
    try:
        after = decode_run_cursor(cursor) if cursor else None
    except ValueError:
        after, cursor = None, ""  # a mangled link: the newest runs rather than an error page
    runs = state.run_store().list_runs(
        program=program, statuses=statuses, limit=size + 1, after=after
    )
    more = len(runs) > size
    runs = runs[:size]
    shown = []
    for run in runs:
        took = None
        if run.started_ms is not None:
            took = ((run.ended_ms or int(time.time() * 1000)) - run.started_ms) / 1000
        shown.append(
            {
                "run_id": run.run_id,
                "program": run.program,
                "status": str(run.status),
                "active": run.status.is_active,
                "started_by": str(run.started_by),
                "logical_time": (
                    None
                    if run.started_by.kind is StarterKind.OPERATOR  # for the time it started
                    else _logical_time(run.arguments.get("_logical_time"))
                ),
                "created": iso(run.created_ms),
                "duration": None if took is None else f"{took:.1f} s",
                "attempts": run.attempts,
                "last_error": run.last_error or "",
                "output": run.output or "",
                "worker": run.worker or "",
            }
        )
    filters = {
        k: v
        for k, v in (
            ("program", program or ""),
            ("status", wanted if statuses else ""),
            ("size", str(size) if size != PAGE_SIZE else ""),
        )
        if v
    }
    older = (
        urlencode({**filters, "cursor": encode_run_cursor(run_cursor(runs[-1]))}) if more else ""
    )
    return {
        "runs": shown,
        "program": program or "",
        "run_status": wanted if statuses else "",
        "statuses": [s.value for s in RunStatus],
        "page_size": size,
        "query": urlencode({**filters, "cursor": cursor} if cursor else filters),
        "newest": urlencode(filters),
        "older": older,
        "paged": bool(cursor),
        "kill_role": Role.OPERATE,
    }


def _page_size(text: str) -> int:
    """The `size` of a page of runs asked for in the URL: 1 to PAGE_SIZE, else PAGE_SIZE."""
    try:
        return min(max(int(text), 1), PAGE_SIZE)
    except ValueError:
        return PAGE_SIZE


@router.post("/runs/kill", response_model=None)
async def kill_run(request: Request) -> Response:
    """Kill one run, confirmed in the page; the answer is a message for its banner."""
    viewer = _viewer(request)
    if viewer is None:
        return _to_login(request)
    if not viewer.role.allows(Role.OPERATE):
        return _message(
            request,
            403,
            f"refused: kill needs the {Role.OPERATE} role, and token {viewer.name!r} has the "
            f"{viewer.role} role",
        )
    run_id = (await _form(request)).get("run_id", "")
    state = _state(request)
    try:
        operator.kill(state.client, state.run_store(), state.settings, run_id, now_ms=now_ms())
    except SchedulerError as error:
        return _message(request, 409, str(error))
    return _message(request, 200, f"kill requested for run {run_id}")


def _logical_time(value: Any) -> str | None:
    """The time a run is for, in UTC: a schedule's fire (ISO 8601 with its offset) or a batch
    job's partition (`yyyy-MM-dd HH:mm:ss`, UTC already), as its `_logical_time` argument says."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return f"{when:%Y-%m-%d %H:%M:%S} UTC"
