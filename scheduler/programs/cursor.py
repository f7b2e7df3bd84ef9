"""The opaque text of a `RunCursor`, as the API, the dashboard and `scheduler runs list` hand it
out (`next_cursor`, `--after`) and take it back."""

from __future__ import annotations

import base64
import binascii
import json

from scheduler.programs.abc import RunCursor


def encode_run_cursor(cursor: RunCursor) -> str:
    """URL-safe text that `decode_run_cursor` turns back into `cursor`."""
    raw = json.dumps(list(cursor), separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_run_cursor(text: str) -> RunCursor:
    """The cursor `text` encodes; ValueError (naming it) if it is not one `encode_run_cursor`
    made."""
    try:
        created_ms, run_id = json.loads(base64.urlsafe_b64decode(text.encode("ascii")))
        if not isinstance(created_ms, int) or isinstance(created_ms, bool):
            raise TypeError
        if not 0 <= created_ms < 2**63:  # what the stores' integer columns hold
            raise TypeError
        if not isinstance(run_id, str):
            raise TypeError
    except (ValueError, TypeError, binascii.Error, UnicodeEncodeError):
        raise ValueError(
            f"cursor {text!r} is not a `next_cursor` of a runs listing; pass one unchanged, or "
            "leave it out for the first page"
        ) from None
    return created_ms, run_id
