"""The handlers' dependencies: the app's state, and the caller's token checked for a role."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from scheduler.api.auth import Role, TokenEntry
from scheduler.api.state import ApiState

bearer = HTTPBearer(
    auto_error=False,
    description="A token from `scheduler api tokens create --role read|operate|admin`.",
)


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


def unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def check_role(entry: TokenEntry, needed: Role) -> None:
    """403 unless `entry`'s role allows what needs `needed`."""
    if not entry.role.allows(needed):
        raise HTTPException(
            403,
            f"this needs the {needed} role and token {entry.name!r} has the {entry.role} role; "
            f"use a token made with `scheduler api tokens create --role {needed}`",
        )


def require(needed: Role) -> Callable[..., TokenEntry]:
    """A dependency that answers 401 without a valid bearer token, 403 when its role is too
    small, and gives the handler the token's entry otherwise."""

    def dependency(
        request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
    ) -> TokenEntry:
        if credentials is None:
            raise unauthorized(
                "no bearer token: send `Authorization: Bearer <token>` with a token from "
                "`scheduler api tokens create`"
            )
        entry = api_state(request).tokens.verify(credentials.credentials)
        if entry is None:
            raise unauthorized(
                "the bearer token is not a token of this API (mistyped, or revoked); ask an "
                "admin for one made with `scheduler api tokens create`"
            )
        check_role(entry, needed)
        return entry

    dependency.needed_role = needed  # type: ignore[attr-defined]  # for the OpenAPI document
    return dependency
