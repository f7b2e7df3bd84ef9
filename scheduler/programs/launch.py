"""Launch requests: how schedules, batch jobs and operators ask for a run.

A request is an engine task in the program's own queue (ordering id `program:<name>`) whose
uniqueness key is what caused it (`schedule:<name>@<logical time>`, `job:<name>/<partition>`,
`operator:<request id>`): enqueued twice, it is one task key, and the engine runs a completed key
never again; the run id is derived from the same key, so even a request re-executed after a crash
finds the run it made. The `workflow` executor route runs it (see `workflow.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.model import Task, from_epoch_ms, to_epoch_ms
from scheduler.programs.model import StartedBy, StarterKind, run_id_for

WORKFLOW_EXECUTOR = "workflow"
"""The executor route of launch, run and reply tasks."""
PROGRAM_QUEUE = "program:"
RUN_QUEUE = "run:"
BATCH_QUEUE = "runs:"
LAUNCH_QUEUE = "launches:"


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """Start `program` once for `request_key`."""

    program: str
    """The program's name."""
    request_key: str
    """What caused the request; the same cause must give the same key."""
    started_by: StartedBy
    """Who asks."""
    requested_at: datetime
    """When it was asked for (a fire's logical time; now for an operator): the task's time."""
    properties: Mapping[str, Any] = field(default_factory=dict)
    """Arguments over the program's default properties."""
    system: Mapping[str, Any] = field(default_factory=dict)
    """System arguments (logical start time, schedule name, triggering info), passed to the run
    under `_`-prefixed names after the properties."""
    concurrency: int | None = None
    """At most this many active runs of the program, or no limit."""
    reply_to: str | None = None
    """The requester's ordering id (`schedule:<name>`): where "concurrency not met" goes."""
    reply_executor: str = WORKFLOW_EXECUTOR
    """The executor route of that reply (the schedules layer's own)."""

    @property
    def run_id(self) -> str:
        return run_id_for(self.program, self.request_key)

    def arguments(self, defaults: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**defaults, **self.properties}
        merged.update({f"_{name}": value for name, value in self.system.items()})
        return merged

    def task(self) -> Task:
        """The launch task to enqueue with `schedule_task`."""
        return Task(PROGRAM_QUEUE + self.program, self.requested_at, self.request_key, self.data())

    def data(self) -> dict[str, Any]:
        """The launch task's data."""
        return {
            "executor": WORKFLOW_EXECUTOR,
            "op": "launch",
            "program": self.program,
            "request_key": self.request_key,
            "started_by": str(self.started_by),
            "properties": dict(self.properties),
            "system": dict(self.system),
            "concurrency": self.concurrency,
            "reply_to": self.reply_to,
            "reply_executor": self.reply_executor,
        }

    @classmethod
    def from_task(cls, task: Task) -> LaunchRequest:
        return cls.from_data(task.data, task.scheduled_time)

    @classmethod
    def from_data(cls, data: Mapping[str, Any], requested_at: datetime) -> LaunchRequest:
        """The request in a launch task's data (or an entry of a `launch-many` task's)."""
        return cls(
            program=data["program"],
            request_key=data["request_key"],
            started_by=StartedBy.parse(data["started_by"]),
            requested_at=requested_at,
            properties=dict(data.get("properties") or {}),
            system=dict(data.get("system") or {}),
            concurrency=data.get("concurrency"),
            reply_to=data.get("reply_to"),
            reply_executor=data.get("reply_executor") or WORKFLOW_EXECUTOR,
        )


LAUNCH_BATCH = 200
"""Requests per `launch-many` task (a log record stays far below a Kafka message's 1 MB)."""


def launch_batches(requests: Sequence[LaunchRequest], key: str) -> list[Task]:
    """`launch-many` tasks for `requests` (all of one program, one requested time): one per
    `LAUNCH_BATCH` in the order given, keyed `<key>:<digest of the batch's request keys>`. The
    same batch makes the same task, so a requester re-executed after a crash sends it again
    harmlessly; a batch of other requests (the requester decided differently on its second try)
    is another task, never an overwrite that would drop a pending batch's requests.

    A batch holding a request with a concurrency limit goes to the program's queue, where limits
    are counted. A limit-free batch gets a queue of its own, `launches:<program>:<digest>`, so
    the batches of an instant create their runs side by side instead of one after another: they
    count no limit, and a limited launch counting beside them is decided as if it came first."""
    tasks: list[Task] = []
    for start in range(0, len(requests), LAUNCH_BATCH):
        batch = requests[start : start + LAUNCH_BATCH]
        first = batch[0]
        digest = hashlib.sha1("\n".join(r.request_key for r in batch).encode()).hexdigest()
        limited = any(r.concurrency is not None for r in batch)
        queue = (
            PROGRAM_QUEUE + first.program
            if limited
            else f"{LAUNCH_QUEUE}{first.program}:{digest[:20]}"
        )
        tasks.append(
            Task(
                queue,
                first.requested_at,
                f"{key}:{digest[:20]}",
                {
                    "executor": WORKFLOW_EXECUTOR,
                    "op": "launch-many",
                    "program": first.program,
                    "requests": [
                        {**r.data(), "requested_ms": to_epoch_ms(r.requested_at)} for r in batch
                    ],
                },
            )
        )
    return tasks


def requests_of(task: Task) -> list[LaunchRequest]:
    """The requests of a `launch-many` task."""
    return [
        LaunchRequest.from_data(data, from_epoch_ms(int(data["requested_ms"])))
        for data in task.data["requests"]
    ]


def operator_request(
    program: str,
    request_id: str,
    *,
    operator: str,
    now_ms: int,
    properties: Mapping[str, Any] | None = None,
) -> LaunchRequest:
    """A manual start (`scheduler runs start`): keyed by the operator's request id."""
    return LaunchRequest(
        program=program,
        request_key=f"operator:{request_id}",
        started_by=StartedBy(StarterKind.OPERATOR, operator),
        requested_at=from_epoch_ms(now_ms),
        properties=dict(properties or {}),
        system={"logical_time": from_epoch_ms(now_ms).isoformat()},
    )


def run_task(run_id: str, created_ms: int) -> Task:
    """The task that executes a run: its own queue, so runs of a program run in parallel."""
    return Task(
        RUN_QUEUE + run_id,
        from_epoch_ms(created_ms),
        "run",
        {"executor": WORKFLOW_EXECUTOR, "op": "run", "run_id": run_id},
    )


def batch_of(program: str, run_ids: Sequence[str]) -> str:
    """The ordering id of the `run-many` task that starts these runs of `program` (the
    limit-free runs of one launch batch): `runs:<program>:<digest of the run ids>`, so a launch
    batch re-executed after a crash names the same task, and every batch runs in a queue of its
    own, in parallel with the others."""
    digest = hashlib.sha1("\n".join(run_ids).encode()).hexdigest()
    return f"{BATCH_QUEUE}{program}:{digest[:20]}"


def run_many_task(batch: str, run_ids: Sequence[str], created_ms: int) -> Task:
    """The task that starts, runs and ends the runs of `batch` (`batch_of`) together."""
    return Task(
        batch,
        from_epoch_ms(created_ms),
        "run-many",
        {"executor": WORKFLOW_EXECUTOR, "op": "run-many", "run_ids": list(run_ids)},
    )
