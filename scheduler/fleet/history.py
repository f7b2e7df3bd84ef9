"""The record of a fleet's attempts: the executor that writes it, reading it back, and the
verdict on it (missing, duplicated, out of order, overlapping)."""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from scheduler.engine.clock import now_ms
from scheduler.executors.abc import ExecutionContext
from scheduler.model import Task, TaskKey

RECORD_ENV = "SCHEDULER_FLEET_RECORD"
"""The environment variable naming the file `recording_executor` appends to."""

KeyTuple = tuple[str, int, str]
"""A task key as plain data: (ordering_id, scheduled_ms, uniqueness_key)."""


# -- the recording executor -------------------------------------------------------------------


class _Recorder:
    """One append-only descriptor per record file and process, shared by the pool's threads."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self._lock = threading.Lock()

    def write(self, line: Mapping[str, Any]) -> None:
        path = os.environ.get(RECORD_ENV)
        if not path:
            raise RuntimeError(
                f"{RECORD_ENV} is not set; recording_executor needs a file to append to"
            )
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            fd = self._fds.get(path)
            if fd is None:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                self._fds[path] = fd
        # One write() per line: with O_APPEND the kernel places it atomically at the end.
        os.write(fd, data)


_recorder = _Recorder()


def recording_executor(task: Task, context: ExecutionContext) -> None:
    """Record the attempt, sleep `data["sleep_ms"]`, fail while `attempt <= fail_attempts`."""
    key = task.key
    base = {
        "ordering_id": key.ordering_id,
        "scheduled_ms": key.scheduled_ms,
        "uniqueness_key": key.uniqueness_key,
        "attempt": context.attempt,
        "worker": os.getpid(),
        "partition": context.partition,
    }
    start_ms = now_ms()
    _recorder.write({**base, "event": "start", "start_ms": start_ms})
    ok = False
    try:
        sleep_s = float(task.data.get("sleep_ms", 0)) / 1000
        if sleep_s > 0 and context.cancelled.wait(sleep_s):
            context.raise_if_cancelled()
        context.raise_if_cancelled()
        if int(task.data.get("fail_attempts", 0)) >= context.attempt:
            raise RuntimeError(f"attempt {context.attempt} of {key} fails on purpose")
        ok = True
    finally:
        _recorder.write(
            {**base, "event": "end", "start_ms": start_ms, "end_ms": now_ms(), "ok": ok}
        )


# -- reading and checking the history ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Execution:
    """One attempt as recorded by `recording_executor`."""

    ordering_id: str
    scheduled_ms: int
    uniqueness_key: str
    attempt: int
    """1 for the first attempt."""
    worker: int
    """The pid of the worker process that ran it."""
    partition: int
    """The log partition of the task."""
    start_ms: int
    end_ms: int | None
    """None when the attempt never ended (its worker was killed while it ran)."""
    ok: bool
    """True when the attempt succeeded."""

    @property
    def key(self) -> KeyTuple:
        return (self.ordering_id, self.scheduled_ms, self.uniqueness_key)


def read_history(path: Path | str) -> list[Execution]:
    """Every attempt in the record file, matching start and end lines; sorted by start time.

    A start without an end is an attempt whose process died during it (`end_ms` None, not ok).
    A torn last line (a process killed mid-write) is ignored.
    """
    started: dict[tuple[KeyTuple, int, int, int], dict[str, Any]] = {}
    ended: list[dict[str, Any]] = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            continue
        ident = (_key(line), line["attempt"], line["worker"], line["start_ms"])
        if line.get("event") == "start":
            started[ident] = line
        else:
            started.pop(ident, None)
            ended.append(line)
    executions = [_execution(line) for line in ended]
    executions += [_execution(line) for line in started.values()]
    executions.sort(key=lambda e: (e.start_ms, e.end_ms or 0))
    return executions


def _key(line: Mapping[str, Any]) -> KeyTuple:
    return (line["ordering_id"], int(line["scheduled_ms"]), line["uniqueness_key"])


def _execution(line: Mapping[str, Any]) -> Execution:
    end = line.get("end_ms")
    return Execution(
        ordering_id=line["ordering_id"],
        scheduled_ms=int(line["scheduled_ms"]),
        uniqueness_key=line["uniqueness_key"],
        attempt=int(line["attempt"]),
        worker=int(line["worker"]),
        partition=int(line.get("partition", -1)),
        start_ms=int(line["start_ms"]),
        end_ms=None if end is None else int(end),
        ok=bool(line.get("ok", False)),
    )


def as_key_tuple(key: TaskKey | Iterable[Any]) -> KeyTuple:
    """(ordering_id, scheduled_ms, uniqueness_key) of a `TaskKey` or such a tuple."""
    if isinstance(key, TaskKey):
        return (key.ordering_id, key.scheduled_ms, key.uniqueness_key)
    ordering_id, scheduled, uniqueness_key = key
    if isinstance(scheduled, datetime):
        scheduled = TaskKey(ordering_id, scheduled, uniqueness_key).scheduled_ms
    return (str(ordering_id), int(scheduled), str(uniqueness_key))


@dataclass
class HistoryReport:
    """What `check_history` found. `ok` holds when nothing is missing, out of order or
    overlapping; duplicates are reported, and judged by the caller (allowed after a crash)."""

    accepted: int
    """Keys the producers had acknowledged."""
    executed: int
    """Distinct keys with at least one successful attempt (accepted or not)."""
    attempts: int
    """Attempts recorded, failed and unfinished ones included."""
    missing: list[KeyTuple] = field(default_factory=list)
    """Accepted keys that never completed successfully."""
    duplicates: dict[KeyTuple, int] = field(default_factory=dict)
    """Keys with more than one successful attempt, and how many they had."""
    order_violations: list[tuple[KeyTuple, KeyTuple]] = field(default_factory=list)
    """(earlier key, later key) pairs of one ordering id whose first successful runs started
    the other way round."""
    concurrent_violations: list[tuple[Execution, Execution]] = field(default_factory=list)
    """Two finished attempts of one ordering id that overlapped in time."""
    unfinished: list[Execution] = field(default_factory=list)
    """Attempts that started and never ended (their worker died)."""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.order_violations or self.concurrent_violations)

    def summary(self) -> str:
        return (
            f"accepted {self.accepted}, executed {self.executed}, attempts {self.attempts}, "
            f"missing {len(self.missing)}, duplicates {len(self.duplicates)}, "
            f"order violations {len(self.order_violations)}, "
            f"concurrent violations {len(self.concurrent_violations)}, "
            f"unfinished {len(self.unfinished)}"
        )


def check_history(
    accepted: Collection[TaskKey | Iterable[Any]], executions: Iterable[Execution]
) -> HistoryReport:
    """Compare what was accepted with what ran.

    The order check assumes each ordering id's tasks were enqueued in key order (as
    `LoadGenerator` does): then their first successful runs must start in key order.
    """
    wanted = {as_key_tuple(key) for key in accepted}
    attempts = list(executions)
    successes: dict[KeyTuple, list[Execution]] = defaultdict(list)
    by_ordering_id: dict[str, list[Execution]] = defaultdict(list)
    unfinished: list[Execution] = []
    for execution in attempts:
        if execution.ok:
            successes[execution.key].append(execution)
        if execution.end_ms is None:
            unfinished.append(execution)
        else:
            by_ordering_id[execution.ordering_id].append(execution)
    report = HistoryReport(
        accepted=len(wanted), executed=len(successes), attempts=len(attempts), unfinished=unfinished
    )
    report.missing = sorted(wanted - successes.keys(), key=_schedule_order)
    report.duplicates = {key: len(runs) for key, runs in successes.items() if len(runs) > 1}

    firsts: dict[str, list[Execution]] = defaultdict(list)
    for runs in successes.values():
        first = min(runs, key=lambda e: e.start_ms)
        firsts[first.ordering_id].append(first)
    for runs in firsts.values():
        runs.sort(key=lambda e: (e.start_ms, e.end_ms or 0))
        for before, after in pairwise(runs):
            if _schedule_order(after.key) < _schedule_order(before.key):
                report.order_violations.append((before.key, after.key))

    for runs in by_ordering_id.values():
        runs.sort(key=lambda e: e.start_ms)
        latest: Execution | None = None
        for execution in runs:
            if latest is not None and latest.end_ms and execution.start_ms < latest.end_ms:
                report.concurrent_violations.append((latest, execution))
            if latest is None or (execution.end_ms or 0) > (latest.end_ms or 0):
                latest = execution
    return report


def _schedule_order(key: KeyTuple) -> tuple[int, str, str]:
    return (key[1], key[0], key[2])
