"""Listings answered as JSON bytes made once, not as pydantic models FastAPI checks again.

A route that returns a model has FastAPI dump it, validate the dump against the response model
and serialise the result with the standard library: three passes over a page of 100 for JSON
the route already holds as plain dicts and lists. The listings build those dicts from the
store's rows in the response model's field order and return them through `json_response`; the
route keeps `response_model=`, so the OpenAPI document is unchanged, and tests check the bytes
against the model (tests/api/test_listing_json.py).
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from starlette.responses import Response


def json_bytes(content: Any) -> bytes:
    """`content` as compact UTF-8 JSON, the bytes Starlette's `JSONResponse` would send.

    orjson refuses integers beyond 64 bits, which task data may hold (Python's `json` reads
    them); such a page is written by the standard library instead."""
    try:
        return orjson.dumps(content)
    except TypeError:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def json_response(content: Any, status_code: int = 200) -> Response:
    """A JSON response of `content` (plain dicts, lists, strings, numbers, None)."""
    return Response(json_bytes(content), status_code=status_code, media_type="application/json")
