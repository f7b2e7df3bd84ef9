"""Programs (named, declared work) and their runs, launched through the engine.

    from scheduler.programs import LaunchRequest, StartedBy, StarterKind

    request = LaunchRequest(
        program="rollup",
        request_key=f"schedule:daily@{logical_time.isoformat()}",
        started_by=StartedBy(StarterKind.SCHEDULE, "daily"),
        requested_at=logical_time,
        concurrency=1,
        reply_to="schedule:daily",
    )
    client.schedule_task(request.task())

See docs/programs-and-runs.md.
"""

from scheduler.programs.abc import RunStore
from scheduler.programs.catalog import ProgramCatalog, load_programs
from scheduler.programs.events import (
    DataAvailableEvent,
    EventPublisher,
    ProgramStatusEvent,
    publish_output,
)
from scheduler.programs.launch import LaunchRequest, operator_request, run_task
from scheduler.programs.model import (
    Program,
    ProgramKind,
    Run,
    RunStatus,
    StartedBy,
    StarterKind,
    run_id_for,
)
from scheduler.programs.subscriber import EventHandler, EventSubscriber, ReceivedEvent
from scheduler.programs.workflow import WorkflowExecutor

__all__ = [
    "DataAvailableEvent",
    "EventHandler",
    "EventPublisher",
    "EventSubscriber",
    "LaunchRequest",
    "Program",
    "ProgramCatalog",
    "ProgramKind",
    "ProgramStatusEvent",
    "ReceivedEvent",
    "Run",
    "RunStatus",
    "RunStore",
    "StartedBy",
    "StarterKind",
    "WorkflowExecutor",
    "load_programs",
    "operator_request",
    "publish_output",
    "run_id_for",
    "run_task",
]
