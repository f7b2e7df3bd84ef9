"""An embedded engine with programs and schedules, the events subscriber running."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from scheduler.executors.abc import Executor
from scheduler.executors.command import CommandExecutor
from scheduler.executors.registry import RoutingExecutor
from scheduler.programs.abc import RunStore
from scheduler.programs.catalog import ProgramCatalog
from scheduler.programs.events import EventPublisher
from scheduler.programs.model import Program
from scheduler.programs.runtime import embedded_programs
from scheduler.schedules.client import SchedulesClient
from scheduler.schedules.runtime import embedded_schedules
from scheduler.testing import TEST_SETTINGS, TestEngine
from tests.programs.helpers import FAILS, OK, SLOW


@dataclass
class Scheduled:
    engine: TestEngine
    schedules: SchedulesClient
    runs: RunStore
    publisher: EventPublisher


@contextmanager
def schedules_engine(
    tmp_path: Path, programs: Iterable[Program] = (OK, FAILS, SLOW)
) -> Iterator[Scheduled]:
    routes: dict[str, Executor] = {"command": CommandExecutor(log_dir=str(tmp_path / "logs"))}
    router = RoutingExecutor(routes, default="command")
    engine = TestEngine(router, data_dir=tmp_path / "data", partitions=4, settings=TEST_SETTINGS)
    catalog = ProgramCatalog(programs)
    attached = embedded_programs(engine, router, catalog)
    executor = embedded_schedules(engine, attached, router.routes)
    with ExitStack() as stack:
        stack.callback(executor.store.close)
        stack.callback(attached.close)
        stack.enter_context(engine)
        stack.callback(attached.close)
        assert attached.subscriber is not None
        attached.subscriber.start()
        client = SchedulesClient(
            store=executor.store, client=engine.client, catalog=catalog, wait_s=20.0
        )
        yield Scheduled(engine, client, attached.runs, attached.publisher)
