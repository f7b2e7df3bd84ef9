"""`/api/v1/tokens`: the API's bearer tokens, for admins, as `scheduler api tokens` does.

A token is shown once, in the answer that makes it; the tokens file keeps its SHA-256 only,
and neither the API nor its log ever prints it again.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from starlette.exceptions import HTTPException

from scheduler.api.auth import Role, TokenEntry
from scheduler.api.deps import api_state, require
from scheduler.api.errors import ERROR_RESPONSES, ErrorBody
from scheduler.api.schemas import TokenCreated, TokenIn, TokenOut
from scheduler.api.state import ApiState

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"], responses=ERROR_RESPONSES)
State = Annotated[ApiState, Depends(api_state)]
Admin = Annotated[TokenEntry, Depends(require(Role.ADMIN))]
_404: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "No such token."}}
_409: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "A token of that name exists."}
}


def _out(entry: TokenEntry) -> TokenOut:
    return TokenOut(name=entry.name, role=entry.role, created=entry.created)


@router.get("", summary="List tokens")
def list_tokens(state: State, _: Admin) -> list[TokenOut]:
    """Every token's name, role and creation time, by name (never the token or its hash)."""
    return [_out(entry) for entry in sorted(state.tokens.entries(), key=lambda e: e.name)]


@router.post("", status_code=201, summary="Make a token", responses=_409)
def create_token(body: TokenIn, state: State, _: Admin) -> TokenCreated:
    """A new token of `role` named `name`: the answer is the only time it is shown."""
    if any(entry.name == body.name for entry in state.tokens.entries()):
        raise HTTPException(
            409,
            f"a token named {body.name!r} exists; choose another name, or revoke it first "
            f"(DELETE /api/v1/tokens/{body.name})",
        )
    token = state.tokens.create(Role(body.role), body.name)
    entry = state.tokens.verify(token)
    assert entry is not None
    return TokenCreated(**_out(entry).model_dump(), token=token)


@router.delete("/{name}", status_code=204, summary="Revoke a token", responses=_404)
def revoke_token(name: str, state: State, _: Admin) -> Response:
    """Revoke the token named `name`: from now on it is a 401 (sessions of the dashboard
    opened with it end too)."""
    if not state.tokens.revoke(name):
        raise HTTPException(404, f"no token is named {name!r}; GET /api/v1/tokens lists them")
    return Response(status_code=204)
