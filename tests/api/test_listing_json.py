"""The listings' JSON, written once with orjson: the bytes Starlette would send, integers of
any size, and the response models still in the OpenAPI document."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse

from scheduler.api.app import create_app
from scheduler.api.listing_json import json_bytes, json_response
from scheduler.settings import Settings

PAGE: dict[str, Any] = {
    "tasks": [
        {"key": "é/1", "attempts": 0, "last_error": None, "data": {"x": [1, 2.5, "ü", True]}},
    ],
    "next_cursor": None,
}


def test_a_page_is_the_bytes_starlettes_json_response_sends() -> None:
    assert json_bytes(PAGE) == JSONResponse(PAGE).body


def test_integers_beyond_64_bits_are_written_by_the_standard_library() -> None:
    big = {"data": {"n": 2**70, "text": "ü"}}
    assert json.loads(json_bytes(big)) == big
    assert json_bytes(big) == JSONResponse(big).body


def test_the_response_says_json_and_carries_the_bytes() -> None:
    answer = json_response(PAGE)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert json.loads(answer.body) == PAGE


def test_the_listings_keep_their_response_models_in_the_openapi_document() -> None:
    paths = create_app(Settings.model_construct()).openapi()["paths"]

    def schema(path: str) -> dict[str, Any]:
        ok = paths[path]["get"]["responses"]["200"]
        return dict(ok["content"]["application/json"]["schema"])

    assert schema("/api/v1/tasks") == {"$ref": "#/components/schemas/TaskPage"}
    listed = schema("/api/v1/schedules")
    assert listed["type"] == "array"
    assert listed["items"] == {"$ref": "#/components/schemas/ScheduleOut"}
