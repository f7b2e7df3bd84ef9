"""Schemathesis against the API's own OpenAPI document: requests generated from the schema (and
off it) never make the API answer a 5xx, every answer's status is one the document declares and
its body matches the schema declared for it."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from scheduler.api.auth import Role
from tests.api.server import ApiServer

EXAMPLES = 12
"""Examples per operation: enough to reach every field of each body, few enough to stay fast."""


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _operations(server: ApiServer) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def test_the_document_has_every_route(server: ApiServer) -> None:
    labels = {operation.label for operation in _operations(server)}
    assert {"POST /api/v1/tasks", "GET /api/v1/fleet", "POST /api/v1/tasks/drop"} <= labels
    assert {"PUT /api/v1/schedules/{name}", "POST /api/v1/batch/jobs/{job}/rerun"} <= labels


@pytest.mark.parametrize("role", [Role.ADMIN, Role.READ])
def test_no_generated_request_is_answered_with_a_server_error(
    server: ApiServer, tokens: dict[Role, str], role: Role
) -> None:
    headers = {"Authorization": f"Bearer {tokens[role]}"}
    for operation in _operations(server):

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        def fuzz(case: Any) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        fuzz()
