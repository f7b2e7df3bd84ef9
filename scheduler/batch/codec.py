"""A job's state as plain JSON, for the store: ranges stay ranges, so a year of hourly successes
is a few bytes."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from scheduler.batch.config import FailurePolicy, OnFailure
from scheduler.batch.durations import Duration
from scheduler.batch.intervals import Intervals
from scheduler.batch.partitions import Grid
from scheduler.batch.state import Failed, JobState, Running

FORMAT = 1
"""Written into every encoded state; a reader refuses one it does not know."""


def _duration(duration: Duration | None) -> dict[str, Any] | None:
    if duration is None:
        return None
    return {"millis": duration.millis, "months": duration.months, "text": duration.text}


def _read_duration(data: Mapping[str, Any] | None) -> Duration | None:
    if data is None:
        return None
    return Duration(int(data["millis"]), int(data["months"]), str(data.get("text", "")))


def _policy(policy: FailurePolicy) -> dict[str, Any]:
    return {
        "on_failure": policy.on_failure.value,
        "retry_delay": _duration(policy.retry_delay),
        "max_attempts": policy.max_attempts,
        "retry_backoff": policy.retry_backoff,
        "max_retry_delay": _duration(policy.max_retry_delay),
    }


def _read_policy(data: Mapping[str, Any]) -> FailurePolicy:
    delay = _read_duration(data["retry_delay"])
    assert delay is not None
    return FailurePolicy(
        OnFailure(data["on_failure"]),
        delay,
        data.get("max_attempts"),
        float(data.get("retry_backoff", 1.0)),
        _read_duration(data.get("max_retry_delay")),
    )


def encode_state(state: JobState) -> dict[str, Any]:
    """`state` as JSON-serialisable data."""
    return {
        "format": FORMAT,
        "job": state.job,
        "grid": {
            "start": state.grid.start,
            "increment": _duration(state.grid.increment),
            "end": state.grid.end,
        },
        "done": [list(r) for r in state.done.ranges],
        "marked": [list(r) for r in state.marked.ranges],
        "removed": [list(r) for r in state.removed.ranges],
        "running": [
            {
                "partition": ms,
                "attempt": run.attempt,
                "started_ms": run.started_ms,
                "policy": _policy(run.policy),
            }
            for ms, run in sorted(state.running.items())
        ],
        "failed": [
            {
                "partition": ms,
                "attempts": f.attempts,
                "ended_ms": f.ended_ms,
                "retry_at": f.retry_at,
                "reason": f.reason,
            }
            for ms, f in sorted(state.failed.items())
        ],
    }


def decode_state(data: Mapping[str, Any]) -> JobState:
    """The JobState `encode_state` wrote; ValueError for a format this version cannot read."""
    if data.get("format") != FORMAT:
        raise ValueError(
            f"a batch job state in format {data.get('format')!r} cannot be read by this "
            f"version (it reads format {FORMAT}); upgrade the scheduler"
        )
    grid = data["grid"]
    increment = _read_duration(grid["increment"])
    assert increment is not None
    running = {
        int(r["partition"]): Running(
            int(r["attempt"]), int(r["started_ms"]), _read_policy(r["policy"])
        )
        for r in data["running"]
    }
    failed = {
        int(f["partition"]): Failed(
            int(f["attempts"]), int(f["ended_ms"]), f["retry_at"], str(f["reason"])
        )
        for f in data["failed"]
    }
    return JobState(
        job=str(data["job"]),
        grid=Grid(int(grid["start"]), increment, int(grid["end"])),
        done=Intervals((lo, hi) for lo, hi in data["done"]),
        marked=Intervals((lo, hi) for lo, hi in data["marked"]),
        removed=Intervals((lo, hi) for lo, hi in data["removed"]),
        running=MappingProxyType(running),
        failed=MappingProxyType(failed),
    )
