"""An embedded engine with programs (`embedded_programs`): the workflow route over a command
route and a route recording replies, runs in SQLite, events in the embedded log."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from scheduler.executors.abc import ExecutionContext, Executor
from scheduler.executors.command import CommandExecutor
from scheduler.executors.registry import RoutingExecutor
from scheduler.logs.abc import TaskLog
from scheduler.model import Task
from scheduler.programs.abc import RunStore
from scheduler.programs.catalog import ProgramCatalog
from scheduler.programs.events import EventPublisher
from scheduler.programs.launch import LaunchRequest
from scheduler.programs.model import Program, ProgramKind, StartedBy, StarterKind
from scheduler.programs.runtime import embedded_programs
from scheduler.programs.subscriber import EventSubscriber
from scheduler.programs.workflow import WorkflowExecutor
from scheduler.testing import TEST_SETTINGS, TestEngine

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
    runs: RunStore
    events_log: TaskLog
    publisher: EventPublisher
    replies: Replies

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
    replies = Replies()
    routes: dict[str, Executor] = {
        "command": CommandExecutor(log_dir=str(tmp_path / "logs")),
        "replies": replies,
    }
    router = RoutingExecutor(routes, default="command")
    engine = TestEngine(router, data_dir=tmp_path / "data", partitions=4, settings=TEST_SETTINGS)
    attached = embedded_programs(engine, router, ProgramCatalog(programs))
    with ExitStack() as stack:
        stack.callback(attached.close)  # if the engine does not start
        stack.enter_context(engine)
        stack.callback(attached.close)  # before the engine stops and closes the log
        yield Programs(
            engine,
            attached.executor,
            attached.runs,
            attached.events_log,
            attached.publisher,
            replies,
        )
