"""Every error the API answers is JSON: `{"error": kind, "message": what is wrong and what to do,
"fields": [...]}`.

A body, path or query that does not match the schema is a 400 naming each field (FastAPI's
default would be a 422); the product's own refusals keep the messages the CLI shows: a rejected
task or a bad filter is a 400, an unknown task a 404, a task in the wrong state a 409, an
unreachable backend a 503. A Cassandra request that fails for the cluster's state rather than for
the request (`Unavailable`, a read or write timeout or failure, no host answering), even where a
store lets the driver's exception through, is a 503 too, with `Retry-After`. Anything else is
a bug: a 500 whose body says only that, while the traceback goes to the log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cassandra import OperationTimedOut, RequestExecutionException
from cassandra.cluster import NoHostAvailable
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from scheduler.batch.errors import BatchConfigError
from scheduler.errors import (
    BackendUnavailableError,
    ConfigurationError,
    DeploymentFileError,
    SchedulerError,
    TaskNotFoundError,
    TaskRejected,
    TaskStateError,
)
from scheduler.schedules.errors import ScheduleError

_log = logging.getLogger(__name__)


class FieldProblem(BaseModel):
    """One field of a request that is not what the schema says."""

    field: str = Field(description="Where: `body.tasks[0].scheduled_time`, `query.limit`.")
    problem: str = Field(description="What is wrong with it.")


class ErrorBody(BaseModel):
    """The body of every error answer."""

    error: str = Field(description="The kind: bad_request, unauthorized, forbidden, not_found, ...")
    message: str = Field(description="What is wrong and what to do about it.")
    fields: list[FieldProblem] = Field(default_factory=list)


_KINDS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    503: "unavailable",
}


def error_response(
    status: int,
    message: str,
    fields: list[FieldProblem] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(error=_KINDS.get(status, "error"), message=message, fields=fields or [])
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def field_path(location: tuple[Any, ...] | list[Any]) -> str:
    """`("body", "tasks", 0, "data")` as `body.tasks[0].data`."""
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _validation(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    problems = [
        FieldProblem(field=field_path(item.get("loc", ())), problem=str(item.get("msg", "invalid")))
        for item in error.errors()
    ]
    named = "; ".join(f"{p.field}: {p.problem}" for p in problems[:5])
    message = (
        f"the request does not match the API's schema ({named}); fix the field(s) named, as "
        "/openapi.json describes them"
    )
    return error_response(400, message, problems)


def _http(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    message = str(error.detail)
    # The router's own answers name nothing: say what was asked and where the paths are.
    if error.status_code == 404 and message == "Not Found":
        message = (
            f"no path {request.url.path} in this API; its paths are listed in /openapi.json "
            "(and by `scheduler api docs`)"
        )
    elif error.status_code == 405 and message == "Method Not Allowed":
        headers = {name.lower(): value for name, value in (error.headers or {}).items()}
        allowed = headers.get("allow", "")
        message = (
            f"{request.method} is not allowed on {request.url.path}; it allows {allowed or 'none'}"
            f"{_elsewhere(request)} (see /openapi.json)"
        )
    return error_response(error.status_code, message, headers=error.headers)


def _elsewhere(request: Request) -> str:
    """Where a collection's items take the method asked (`PUT /api/v1/schedules/{name}` for
    a POST on /api/v1/schedules): creating by name is a PUT on the item, not a POST."""
    below = request.url.path.rstrip("/") + "/{"
    for path, operations in request.app.openapi()["paths"].items():  # built once, then cached
        if path.startswith(below) and path.count("/") == below.count("/"):
            for method in ("PUT", request.method):
                if method.lower() in operations:
                    return f"; {method} {path} does, for one item"
    return ""


def _scheduler(request: Request, error: Exception) -> JSONResponse:
    if isinstance(error, TaskNotFoundError | LookupError):  # a run, a program
        return error_response(404, str(error))
    if isinstance(error, TaskStateError):
        return error_response(409, str(error))
    if isinstance(error, BackendUnavailableError):
        return error_response(503, str(error))
    if isinstance(error, DeploymentFileError):
        _log.error("%s", error)
        return error_response(503, f"{error} (the API answers again once the file is fixed)")
    if isinstance(error, ScheduleError):
        return error_response(400, str(error), _schedule_fields(error))
    if isinstance(error, BatchConfigError):  # a configuration sent as a file's `text`
        problems = [FieldProblem(field="body.text", problem=str(p)) for p in error.problems]
        return error_response(400, str(error), problems)
    if isinstance(error, TaskRejected | ConfigurationError):
        return error_response(400, str(error))
    return error_response(400, str(error))


def _schedule_fields(error: ScheduleError) -> list[FieldProblem]:
    """The wrong fields of a schedule sent as a request's body, by their place in the body."""
    return [
        FieldProblem(field="body" if path == "the schedule" else f"body.{path}", problem=problem)
        for path, problem in error.fields
    ]


#: The driver's errors that say the cluster cannot answer now (not that the request is wrong):
#: `RequestExecutionException` covers Unavailable, Read/WriteTimeout and Read/WriteFailure.
CASSANDRA_UNAVAILABLE: tuple[type[Exception], ...] = (
    RequestExecutionException,
    OperationTimedOut,
    NoHostAvailable,
)

RETRY_AFTER_S = 5


def _cassandra(request: Request, error: Exception) -> JSONResponse:
    _log.warning("Cassandra could not answer %s %s: %r", request.method, request.url.path, error)
    message = (
        f"the store is unavailable: Cassandra could not answer ({type(error).__name__}: "
        f"{str(error)[:300]}); retry in a few seconds, and if it persists check the Cassandra "
        "nodes (`nodetool status`) and their logs"
    )
    return error_response(503, message, headers={"Retry-After": str(RETRY_AFTER_S)})


def _value(request: Request, error: Exception) -> JSONResponse:
    # Raised by the product's own checks (a partition that does not exist, a bad filter).
    return error_response(400, str(error))


def _unexpected(request: Request, error: Exception) -> JSONResponse:
    _log.exception("the API failed on %s %s", request.method, request.url.path)
    return error_response(
        500, "the API failed on this request (a bug: its log has the traceback); please report it"
    )


def install(app: FastAPI) -> None:
    """Answer every error as `ErrorBody`."""
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(SchedulerError, _scheduler)
    app.add_exception_handler(ValueError, _value)
    for kind in CASSANDRA_UNAVAILABLE:
        app.add_exception_handler(kind, _cassandra)
    app.add_exception_handler(Exception, _unexpected)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorBody,
        "description": "The request is not what the schema says, or the scheduler refuses it.",
    },
    401: {"model": ErrorBody, "description": "No valid bearer token."},
    403: {"model": ErrorBody, "description": "The token's role may not do this."},
}
"""Declared on every authenticated route, so the OpenAPI document lists them."""
