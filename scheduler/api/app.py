"""The app factory: the REST API and the dashboard of one deployment, in one ASGI app.

`create_app(settings)` builds the routes; the deployment's backends are opened when the server
starts (the lifespan) and closed when it stops, so that building the app alone (for its OpenAPI
document, `scheduler api docs`) reaches no server.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute

from scheduler.api import errors
from scheduler.api.auth import TokenFile
from scheduler.api.routers import batch, checks, fleet, meta, runs, schedules, tasks, tokens
from scheduler.api.schemas import TasksIn
from scheduler.api.state import ApiState
from scheduler.settings import Settings

TITLE = "scheduler"
DESCRIPTION = """The REST API of a scheduler deployment: tasks, the worker fleet, programs and
their runs, schedules, batch jobs and the API's tokens.

Every route but `/api/v1/health` needs `Authorization: Bearer <token>`, a token made with
`scheduler api tokens create --role read|operate|admin` (or by an admin with
`POST /api/v1/tokens`): `read` sees, `operate` also schedules and changes tasks, starts and
kills runs, enables and disables schedules and re-runs, pauses and resumes batch jobs, `admin`
also drops tasks, creates, changes and deletes schedules, checks and loads batch
configurations, and makes, lists and revokes tokens. Errors are JSON (`ErrorBody`): 400 for a
request that is not what the schema says or that the scheduler refuses (each wrong field of
the request, of a schedule or of a batch configuration also in `fields`, by its place in the
body), 401 without a valid token, 403 with too small a role, 404 for an unknown task, program,
run, schedule, batch job or token, 409 for a task, run or schedule in a state the change does
not fit (or a token name taken), 503 when a backend cannot be reached or a file of the
deployment (the programs file, the tokens file) does not read.
"""


ROUTERS = (
    meta.router,
    tasks.router,
    fleet.router,
    runs.router,
    schedules.router,
    batch.router,
    checks.router,
    tokens.router,
)

BODIES_READ_BY_HAND = (TasksIn,)
"""Request bodies a route reads itself (faster than FastAPI's model), named by `openapi_extra`:
their schemas are added to the document's components here."""


def tokens_path(settings: Settings) -> Path:
    """The tokens file `settings` name (`api_tokens_file`, else one in the data dir)."""
    if settings.api_tokens_file is not None:
        return settings.api_tokens_file
    return settings.data_dir / "api-tokens.json"


def create_app(settings: Settings, *, tokens: TokenFile | None = None) -> FastAPI:
    """The API and the dashboard for the deployment `settings` describe."""
    token_file = tokens if tokens is not None else TokenFile(tokens_path(settings))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from scheduler.runtime import connect

        client = connect(settings, admin=True)
        assert client.store is not None
        app.state.api = state = ApiState(settings, client, client.store, token_file)
        # What starting made (modules, routes, schemas, the backends' clients: ~100,000 objects)
        # is kept for good: frozen, the collector's full passes stop walking it. A batch POST
        # of 1,000 tasks makes enough objects to start a full pass every few requests, which
        # cost more than the rest of the request (docs/benchmarks.md, API at 1,000 a request).
        gc.freeze()
        try:
            yield
        finally:
            state.close()

    app = FastAPI(
        title=TITLE,
        description=DESCRIPTION,
        version=_version(),
        lifespan=lifespan,
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    errors.install(app)
    for router in ROUTERS:
        app.include_router(router)
    from scheduler.dashboard import mount

    mount(app)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/dashboard", status_code=303)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with the 400 this API answers in place of FastAPI's 422."""
    document = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    roles = _roles()
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            if (path, method.upper()) in roles:
                operation["x-role"] = roles[path, method.upper()]
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None:
                responses.setdefault(
                    "400",
                    {
                        "description": "The request is not what the schema says, or the "
                        "scheduler refuses it.",
                        "content": {"application/json": {"schema": error_ref}},
                    },
                )
    schemas = document.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for model in BODIES_READ_BY_HAND:
        found = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, schema in found.pop("$defs", {}).items():
            schemas.setdefault(name, schema)
        schemas.setdefault(model.__name__, found)
    document["components"]["schemas"] = dict(sorted(schemas.items()))
    return document


def _roles() -> dict[tuple[str, str], str]:
    """(path, method) -> the role a route needs, from its `require` dependency."""
    found: dict[tuple[str, str], str] = {}
    routes = [route for router in ROUTERS for route in router.routes]
    for route in routes:
        if not isinstance(route, APIRoute):
            continue
        pending = list(route.dependant.dependencies)
        while pending:
            dependant = pending.pop()
            role = getattr(dependant.call, "needed_role", None)
            if role is not None:
                for method in route.methods or ():
                    found[route.path, method] = str(role)
            pending += dependant.dependencies
    return found


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("scheduler")
    except PackageNotFoundError:
        return "0"
