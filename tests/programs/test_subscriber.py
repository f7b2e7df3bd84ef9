"""The events subscriber: handlers get every event once, their tasks are durable before the
event's offset is committed, and a failure re-reads the batch instead of dropping it."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path

import pytest

from scheduler.errors import BackendUnavailableError
from scheduler.model import Task
from scheduler.programs.events import DataAvailableEvent, publish_output
from scheduler.programs.subscriber import ReceivedEvent
from scheduler.programs.workflow import WorkflowExecutor
from tests.programs.helpers import Programs, programs_engine, request
from tests.programs.test_workflow import ended, wait_for


def control_task(received: ReceivedEvent) -> Task:
    """What a schedules handler does: one task keyed by the event's position."""
    event = received.event
    assert isinstance(event, DataAvailableEvent)
    return received.task(
        f"schedule:{event.dataset}", {"executor": "replies", "partitions": list(event.partitions)}
    )


def publish(p: Programs, *partitions: str) -> None:
    for partition in partitions:
        p.publisher.publish_partitions("clicks", [partition]).result(10)


def committed(p: Programs, group: str) -> int:
    return sum(lag.committed or 0 for lag in p.events_log.describe_group(group))


def replied_partitions(p: Programs) -> list[str]:
    with p.replies.lock:
        return sorted(t.data["partitions"][0] for t in p.replies.tasks)


def test_each_event_becomes_the_handlers_tasks_once_across_a_restart(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        publish(p, "h1", "h2")
        first = p.subscriber(handlers=[lambda r: [control_task(r)]]).start()
        wait_for(lambda: committed(p, "test-events") == 2)
        first.stop()
        publish(p, "h3")
        second = p.subscriber(handlers=[lambda r: [control_task(r)]]).start()
        wait_for(lambda: committed(p, "test-events") == 3)
        second.stop()
        p.engine.join()
        assert replied_partitions(p) == ["h1", "h2", "h3"]
        assert {t.ordering_id for t in p.replies.tasks} == {"schedule:clicks"}


def test_a_failing_handler_rereads_its_batch_and_loses_nothing(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        publish(p, "h1", "h2", "h3")
        failed = threading.Event()

        def flaky(received: ReceivedEvent) -> Iterable[Task]:
            event = received.event
            assert isinstance(event, DataAvailableEvent)
            if event.partitions == ("h2",) and not failed.is_set():
                failed.set()
                raise RuntimeError("handler hiccup")
            return [control_task(received)]

        subscriber = p.subscriber(handlers=[flaky], retry_pause_s=0.05).start()
        wait_for(lambda: committed(p, "test-events") == 3)
        subscriber.stop()
        p.engine.join()
        assert failed.is_set()
        assert replied_partitions(p) == ["h1", "h2", "h3"]


def test_no_offset_is_committed_while_the_handlers_tasks_are_not_durable(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        publish(p, "h1")
        refusing = threading.Event()
        refusing.set()
        real = p.engine.client.schedule_task

        def schedule(task: Task) -> Future[int]:
            if refusing.is_set():
                future: Future[int] = Future()
                future.set_exception(BackendUnavailableError("log down"))
                return future
            return real(task)

        subscriber = p.subscriber(handlers=[lambda r: [control_task(r)]], retry_pause_s=0.05)
        subscriber.client = type("Client", (), {"schedule_task": staticmethod(schedule)})()  # type: ignore[assignment]
        subscriber.start()
        wait_for(subscriber.joined.is_set)
        threading.Event().wait(0.5)  # several failed rounds
        assert committed(p, "test-events") == 0
        refusing.clear()
        wait_for(lambda: committed(p, "test-events") == 1)
        subscriber.stop()
        p.engine.join()
        assert replied_partitions(p) == ["h1"]


def test_a_program_publishes_its_output_through_its_run(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        p.workflow.programs = lambda task, context: publish_output("rollup", ["2026-01-01"])
        seen: list[ReceivedEvent] = []
        subscriber = p.subscriber(handlers=[lambda r: seen.append(r) or []]).start()
        launch = request("ok", "operator:out")
        p.launch(launch)
        ended(p, launch.run_id)
        wait_for(lambda: len(seen) == 2)
        subscriber.stop()
    data = [r.event for r in seen if isinstance(r.event, DataAvailableEvent)]
    assert [(e.dataset, e.partitions) for e in data] == [("rollup", ("2026-01-01",))]


def test_publish_output_outside_a_run_is_refused() -> None:
    with pytest.raises(RuntimeError, match="outside a run"):
        publish_output("rollup", ["2026-01-01"])
    assert WorkflowExecutor  # the route that sets the context
