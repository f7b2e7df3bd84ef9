"""Small helpers that keep messages grammatical: "after 1 attempt", "it has failed"."""

from __future__ import annotations

from scheduler.model import TaskState


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 attempt`, `2 attempts` (`plural` for nouns that take more than an s)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


_STATE_PHRASES = {
    TaskState.PENDING: "it is pending",
    TaskState.RUNNING: "it is running",
    TaskState.RETRYING: "it is waiting to be retried",
    TaskState.SUCCEEDED: "it has succeeded",
    TaskState.FAILED: "it has failed",
    TaskState.CANCELLED: "it was cancelled",
}


def in_state(state: TaskState) -> str:
    """Where a task stands, as a clause: `it has succeeded`, not `it is succeeded`."""
    return _STATE_PHRASES.get(state, f"it is {state}")
