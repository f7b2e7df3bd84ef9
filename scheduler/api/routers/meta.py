"""The API about itself: health (for probes, no token needed) and who the caller is."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from scheduler.api.auth import Role, TokenEntry
from scheduler.api.deps import api_state, require
from scheduler.api.errors import ERROR_RESPONSES
from scheduler.api.schemas import HealthOut, WhoAmI
from scheduler.api.state import ApiState
from scheduler.errors import SchedulerError

router = APIRouter(prefix="/api/v1", tags=["api"])


@router.get(
    "/health",
    summary="Health",
    responses={503: {"model": HealthOut, "description": "A backend cannot be reached."}},
)
def health(state: Annotated[ApiState, Depends(api_state)]) -> HealthOut:
    """200 when the API reaches its store and log, 503 (same body) when one is failing. Needs
    no token, so that a load balancer or an orchestrator may probe it."""
    store = state.store.problem() or "ok"
    try:
        state.client.log.partition_count()
        log = "ok"
    except SchedulerError as error:
        log = str(error)
    body = HealthOut(status="ok" if store == log == "ok" else "degraded", store=store, log=log)
    if body.status != "ok":
        return JSONResponse(body.model_dump(), status_code=503)  # type: ignore[return-value]
    return body


@router.get("/whoami", summary="The caller's token", responses=ERROR_RESPONSES)
def whoami(entry: Annotated[TokenEntry, Depends(require(Role.READ))]) -> WhoAmI:
    """The name and role of the token the request carries."""
    return WhoAmI(name=entry.name, role=entry.role)
