"""`/api/v1/programs` and `/api/v1/runs`: the programs a deployment declares, their runs, and an
operator's start and kill, through `scheduler.programs.operator` as `scheduler runs` does.

A start names a declared program: its arguments fill that program's templates (argv items, Spark
arguments), never a shell, so no request can make a worker run a command of its own.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from scheduler.admin import iso
from scheduler.api.auth import Role, TokenEntry
from scheduler.api.deps import api_state, require
from scheduler.api.errors import ERROR_RESPONSES, ErrorBody
from scheduler.api.schemas import (
    ProgramOut,
    RunKilled,
    RunOut,
    RunPage,
    RunStarted,
    RunStartIn,
)
from scheduler.api.state import ApiState
from scheduler.engine.clock import now_ms
from scheduler.programs import operator
from scheduler.programs.abc import run_cursor
from scheduler.programs.cursor import decode_run_cursor, encode_run_cursor
from scheduler.programs.model import Program, Run, RunStatus
from scheduler.programs.runtime import load_catalog

_404: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such program or run."}
}
_409: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "The run has ended already."}
}

router = APIRouter(prefix="/api/v1", tags=["programs and runs"], responses=ERROR_RESPONSES)
State = Annotated[ApiState, Depends(api_state)]
Reader = Annotated[TokenEntry, Depends(require(Role.READ))]
Operator = Annotated[TokenEntry, Depends(require(Role.OPERATE))]


def _program(program: Program) -> ProgramOut:
    return ProgramOut(
        name=program.name,
        kind=str(program.kind),
        spec=dict(program.spec),
        properties=dict(program.properties),
        description=program.description or "",
    )


def _run(run: Run) -> RunOut:
    data: dict[str, Any] = run.to_json()
    for name in ("created_ms", "requested_ms", "started_ms", "ended_ms"):
        value = data.pop(name)
        data[name.removesuffix("_ms") + "_time"] = None if value is None else iso(value)
    return RunOut(**data)


@router.get("/programs", summary="List programs", tags=["programs and runs"])
def list_programs(state: State, _: Reader) -> list[ProgramOut]:
    """Every program of the deployment's programs file (`programs_file`), by name."""
    return [_program(program) for program in load_catalog(state.settings).programs()]


@router.get("/programs/{name}", summary="Get a program", responses=_404)
def get_program(name: str, state: State, _: Reader) -> ProgramOut:
    """One program: its kind, what it runs and its default properties."""
    return _program(load_catalog(state.settings).get(name))


@router.post("/programs/{name}/runs", status_code=202, summary="Start a run", responses=_404)
def start_run(name: str, body: RunStartIn, state: State, caller: Operator) -> RunStarted:
    """Start the program once, by hand: a worker launches it under the program's concurrency
    limit. Answered once the request is on the log; `GET /api/v1/runs/{run_id}` follows it."""
    request = operator.start(
        state.launcher(),
        load_catalog(state.settings),
        name,
        request_id=body.request_id or uuid.uuid4().hex,
        operator=f"api:{caller.name}",
        now_ms=now_ms(),
        properties=body.arguments,
    )
    return RunStarted(run_id=request.run_id, request_key=request.request_key)


@router.get("/runs", summary="List runs")
def list_runs(
    state: State,
    _: Reader,
    program: Annotated[str | None, Query(description="Only this program's runs.")] = None,
    status: Annotated[
        list[RunStatus] | None, Query(description="Only runs in these statuses; repeat.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 50,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the page before.")] = None,
) -> RunPage:
    """Runs newest first, with their arguments, times, attempts and last error, a page at a
    time: continue with the opaque `next_cursor` (keyset paging, so runs created meanwhile
    neither repeat nor shift the older pages)."""
    after = None if cursor is None else decode_run_cursor(cursor)
    runs = state.run_store().list_runs(
        program=program, statuses=status or None, limit=limit + 1, after=after
    )
    following = encode_run_cursor(run_cursor(runs[limit - 1])) if len(runs) > limit else None
    return RunPage(runs=[_run(run) for run in runs[:limit]], next_cursor=following)


@router.get("/runs/{run_id}", summary="Get a run", responses=_404)
def get_run(run_id: str, state: State, _: Reader) -> RunOut:
    """One run: its arguments, status, times, attempts and last error."""
    return _run(operator.get_run(state.run_store(), run_id))


@router.post(
    "/runs/{run_id}/kill", status_code=202, summary="Kill a run", responses={**_404, **_409}
)
def kill_run(run_id: str, state: State, _: Operator) -> RunKilled:
    """Cancel the run's task, which stops its process or Spark job group; it ends KILLED."""
    before = operator.kill(state.client, state.run_store(), state.settings, run_id, now_ms=now_ms())
    return RunKilled(run_id=run_id, killed_before_start=before)
