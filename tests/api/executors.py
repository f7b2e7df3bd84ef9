"""The executor the API tests' workers run: a task fails when its data asks it to."""

from __future__ import annotations

from typing import Any


def flaky(task: Any, context: Any) -> None:
    """Succeed, unless `task.data["fail"]` is set: then fail with that text."""
    reason = task.data.get("fail")
    if reason:
        raise RuntimeError(f"asked to fail: {reason}")
