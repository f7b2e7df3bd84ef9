"""Programs (named, declared work) and runs (one execution of a program), as plain values.

A run's id is derived from what asked for it (`run_id_for`), so a launch request read twice, or
re-executed after a worker crash, finds the run it already made instead of making another.
"""

from __future__ import annotations

import enum
import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

RUN_NAMESPACE = uuid.UUID("6f1c2b0e-3d4a-5b6c-8d7e-9f0a1b2c3d4e")
"""The uuid5 namespace of run ids (fixed forever: changing it would relaunch old requests)."""
_NAMESPACE_BYTES = RUN_NAMESPACE.bytes


class ProgramKind(enum.StrEnum):
    """What a program runs, and so which executor route runs it."""

    SPARK = "spark"
    """A registered PySpark job (`package.module:function`), run in the worker's session."""
    SPARK_SUBMIT = "spark-submit"
    """A Spark application handed to `spark-submit`."""
    COMMAND = "command"
    """An argv template, run as a process group (never a shell)."""


class RunStatus(enum.StrEnum):
    """PENDING -> RUNNING -> COMPLETED / FAILED / KILLED."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    KILLED = "KILLED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL

    @property
    def is_active(self) -> bool:
        return self in ACTIVE


TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.KILLED})
ACTIVE = frozenset({RunStatus.PENDING, RunStatus.RUNNING})


class StarterKind(enum.StrEnum):
    """Who may start a run."""

    SCHEDULE = "schedule"
    BATCH_JOB = "batch-job"
    OPERATOR = "operator"


@dataclass(frozen=True, slots=True)
class StartedBy:
    """Who started a run, and under which name."""

    kind: StarterKind
    """A schedule, a batch job or an operator."""
    name: str
    """The schedule's or batch job's name, or the operator's (the user name by default)."""

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> StartedBy:
        kind, _, name = text.partition(":")
        return cls(StarterKind(kind), name)


@dataclass(frozen=True, slots=True)
class Program:
    """Named, declared work."""

    name: str
    """The program's name: what schedules, batch jobs and operators start."""
    kind: ProgramKind
    """What it runs (see `ProgramKind`)."""
    spec: Mapping[str, Any]
    """The executor's task data without the route: `{"job": ...}` for spark, `{"application":
    ...}` for spark-submit, `{"argv": [...]}` for command (see those executors)."""
    properties: Mapping[str, Any] = field(default_factory=dict)
    """Default arguments; a run's own arguments override them."""
    description: str = ""
    """One line for `scheduler programs list`."""

    def task_data(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The data of the executor task that runs this program with `arguments` (already
        merged over the defaults): a spark job gets them as keyword `args`; a command gets
        them as template `vars` for its argv; spark-submit gets them as `conf`-free `vars`
        rendered into `args` by name (`{{name}}`)."""
        data: dict[str, Any] = {"executor": str(self.kind), **self.spec}
        if self.kind is ProgramKind.SPARK:
            data["args"] = {**dict(self.spec.get("args", {})), **arguments}
        elif self.kind is ProgramKind.COMMAND:
            data["vars"] = {
                **dict(self.spec.get("vars", {})),
                **{k: _text(v) for k, v in arguments.items()},
            }
        else:
            data["args"] = [_render(str(arg), arguments) for arg in self.spec.get("args", [])]
        return data


def _text(value: Any) -> str:
    """An argument as a template variable: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _render(template: str, arguments: Mapping[str, Any]) -> str:
    for name, value in arguments.items():
        template = template.replace("{{" + name + "}}", _text(value))
    return template


def run_id_for(program: str, request_key: str) -> str:
    """The run id of the launch asked for by `request_key` (deterministic: uuid5)."""
    # uuid.uuid5 spelled out (the same id): a launch of 200 runs derives 200 of them, and the
    # UUID class's checks cost more than the hash.
    digest = bytearray(
        hashlib.sha1(_NAMESPACE_BYTES + f"{program}\x00{request_key}".encode()).digest()[:16]
    )
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = digest.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


@dataclass(frozen=True, slots=True)
class Run:
    """One execution of a program: a durable record with a retention."""

    run_id: str
    """Derived from the launch request (`run_id_for`)."""
    program: str
    """The program's name."""
    started_by: StartedBy
    """Who asked for it."""
    arguments: Mapping[str, Any]
    """The program's properties, then the request's, then the system arguments (logical start
    time, schedule name, triggering info) under `_`-prefixed names."""
    status: RunStatus
    """Where it stands."""
    created_ms: int
    """When the launch wrote it (PENDING)."""
    requested_ms: int
    """When it was asked for (the launch request's scheduled time): launch latency is
    `started_ms - requested_ms`."""
    started_ms: int | None = None
    """When its latest attempt started running."""
    ended_ms: int | None = None
    """When it reached a terminal status."""
    attempts: int = 0
    """How many times it started running (2 after a worker crashed under it)."""
    last_error: str | None = None
    """Why it failed, or who killed it."""
    request_key: str = ""
    """What caused it (schedule + logical time, job + partition, operator request id)."""
    batch: str | None = None
    """The ordering id of the `run-many` task that starts it with the other limit-free runs of
    its launch batch, or None when it has a `run` task of its own (`run:<run_id>`)."""
    output: str | None = None
    """Where its program's output went, on the worker that ran it: the file its executor wrote
    (a command's standard output, a spark-submit's log), or None if it wrote none."""
    worker: str | None = None
    """The worker process running (or that ran) its latest attempt, by its `client_id`: the
    machine `output` is on."""

    def with_status(self, status: RunStatus, **changes: Any) -> Run:
        return replace(self, status=status, **changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "program": self.program,
            "started_by": str(self.started_by),
            "arguments": dict(self.arguments),
            "status": str(self.status),
            "created_ms": self.created_ms,
            "requested_ms": self.requested_ms,
            "started_ms": self.started_ms,
            "ended_ms": self.ended_ms,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "request_key": self.request_key,
            **({} if self.batch is None else {"batch": self.batch}),
            **({} if self.output is None else {"output": self.output}),
            **({} if self.worker is None else {"worker": self.worker}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Run:
        return cls(
            run_id=data["run_id"],
            program=data["program"],
            started_by=StartedBy.parse(data["started_by"]),
            arguments=dict(data.get("arguments") or {}),
            status=RunStatus(data["status"]),
            created_ms=int(data["created_ms"]),
            requested_ms=int(data["requested_ms"]),
            started_ms=data.get("started_ms"),
            ended_ms=data.get("ended_ms"),
            attempts=int(data.get("attempts") or 0),
            last_error=data.get("last_error"),
            request_key=data.get("request_key") or "",
            batch=data.get("batch"),
            output=data.get("output"),
            worker=data.get("worker"),
        )
