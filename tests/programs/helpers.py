"""An embedded engine with programs: the workflow route over a command route, a SQLite run
store and the events topic in the embedded log's file."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from scheduler.executors.abc import ExecutionContext, Executor
from scheduler.executors.command import CommandExecutor
from scheduler.executors.registry import RoutingExecutor
from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.model import Task
from scheduler.programs.catalog import ProgramCatalog
from scheduler.programs.events import EventPublisher, events_topic
from scheduler.programs.launch import LaunchRequest
from scheduler.programs.model import Program, ProgramKind, StartedBy, StarterKind
from scheduler.programs.runtime import LATE_RUN_TASKS_S
from scheduler.programs.subscriber import EventSubscriber, ReceivedEvent
from scheduler.programs.workflow import WorkflowExecutor
from scheduler.stores.runs_sqlite import SqliteRunStore
from scheduler.testing import TestEngine, embedded_engine

PY = sys.executable


def command(name: str, *argv: str, **properties: object) -> Program:
    return Program(name, ProgramKind.COMMAND, {"argv": list(argv)}, properties)


OK = command("ok", PY, "-c", "print('{{table}}')", table="clicks")
FAILS = command("fails", PY, "-c", "import sys; sys.exit(3)")
SLOW = command("slow", PY, "-c", "import time; time.sleep(60)")


class Replies:
    """An executor route recording the replies a requester gets."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []
        self.lock = threading.Lock()

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        with self.lock:
            self.tasks.append(task)


@dataclass
class Programs:
    engine: TestEngine
    workflow: WorkflowExecutor
    runs: SqliteRunStore
    events_log: EmbeddedTaskLog
    publisher: EventPublisher
    replies: Replies
    received: list[ReceivedEvent] = field(default_factory=list)

    def launch(self, request: LaunchRequest) -> None:
        self.engine.client.schedule_task(request.task()).result(10)

    def subscriber(self, group: str = "test-events", **kwargs: object) -> EventSubscriber:
        return EventSubscriber(
            log=self.events_log,
            client=self.engine.client,
            group_id=group,
            **kwargs,  # type: ignore[arg-type]
        )


def request(
    program: str, key: str, *, concurrency: int | None = None, reply_to: str | None = None
) -> LaunchRequest:
    return LaunchRequest(
        program=program,
        request_key=key,
        started_by=StartedBy(StarterKind.SCHEDULE, "nightly"),
        requested_at=datetime.now(UTC),
        properties={"table": "views"} if program == "ok" else {},
        system={"logical_time": "2026-01-01T00:00:00+00:00", "schedule": "nightly"},
        concurrency=concurrency,
        reply_to=reply_to,
        reply_executor="replies",
    )


@contextmanager
def programs_engine(
    tmp_path: Path, programs: Iterable[Program] = (OK, FAILS, SLOW)
) -> Iterator[Programs]:
    routes: dict[str, Executor] = {
        "command": CommandExecutor(log_dir=str(tmp_path / "logs")),
        "replies": Replies(),
    }
    router = RoutingExecutor(routes, default="command")
    with embedded_engine(router, data_dir=tmp_path / "data") as engine:
        runs = SqliteRunStore(path=str(tmp_path / "data" / "store.db"))
        runs.open()
        events_log = EmbeddedTaskLog(
            path=str(tmp_path / "data" / "log.db"), topic=events_topic("scheduler-tasks")
        )
        events_log.ensure_topic(2)
        publisher = EventPublisher(events_log)
        from scheduler.client import SchedulerClient

        client = SchedulerClient(log=engine.log, grace_window_s=LATE_RUN_TASKS_S)
        workflow = WorkflowExecutor(
            catalog=ProgramCatalog(programs),
            runs=runs,
            client=client,
            programs=RoutingExecutor({"command": routes["command"]}, default="command"),
            events=publisher,
        )
        router.routes["workflow"] = workflow
        try:
            yield Programs(engine, workflow, runs, events_log, publisher, routes["replies"])  # type: ignore[arg-type]
        finally:
            client.close()
            publisher.close()
            runs.close()
            events_log.close()
