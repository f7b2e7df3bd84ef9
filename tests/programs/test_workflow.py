"""Launching and running programs through the engine's `workflow` route, on the embedded
backend."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from scheduler.errors import TaskCancelledError, UnknownProgramError
from scheduler.executors.abc import CANCELLED_BY_OPERATOR, TIMED_OUT, ExecutionContext
from scheduler.model import Task, TaskKey
from scheduler.programs.events import EventPublisher, ProgramStatusEvent
from scheduler.programs.launch import LAUNCH_BATCH, launch_batches, requests_of, run_task
from scheduler.programs.model import Run, RunStatus, StartedBy, StarterKind
from scheduler.programs.subscriber import ReceivedEvent
from tests.programs.helpers import Programs, programs_engine, request


def wait_for(check, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def ended(p: Programs, run_id: str) -> Run:
    return wait_for(lambda: (r := p.runs.get(run_id)) is not None and r.status.is_terminal and r)


def test_a_launched_command_program_runs_and_completes_with_its_arguments(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        launch = request("ok", "schedule:nightly@2026-01-01T00:00Z")
        p.launch(launch)
        run = ended(p, launch.run_id)
        p.engine.join()

    assert run.status is RunStatus.COMPLETED
    assert run.attempts == 1
    assert run.program == "ok"
    assert str(run.started_by) == "schedule:nightly"
    assert run.arguments == {
        "table": "views",
        "_logical_time": "2026-01-01T00:00:00+00:00",
        "_schedule": "nightly",
    }
    assert run.started_ms is not None and run.ended_ms is not None
    assert run.created_ms <= run.started_ms <= run.ended_ms
    out = list((tmp_path / "logs").rglob("*.out"))
    assert [f.read_text() for f in out] == ["views\n"]
    assert run.output == str(out[0])  # where its output went
    assert run.worker == p.engine.worker.client_id  # and on which worker's machine


def test_each_ended_run_gets_one_line_under_the_task_log_level(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker's log says which run of which program ended how, and for what, in words an
    operator can take to `scheduler runs show`; `task_log_level` WARNING keeps failures only."""
    caplog.set_level(logging.INFO, logger="scheduler.tasks")
    with programs_engine(tmp_path) as p:
        fired = request("ok", "schedule:nightly@2026-01-01T00:00Z")
        by_hand = replace(
            request("fails", "operator:f"),
            started_by=StartedBy(StarterKind.OPERATOR, "f"),
            system={"logical_time": "2026-11-29T09:00:00+00:00"},
        )
        p.launch(fired)
        p.launch(by_hand)
        ended(p, fired.run_id), ended(p, by_hand.run_id)
        caplog.set_level(logging.WARNING, logger="scheduler.tasks")
        quiet = request("ok", "schedule:nightly@2026-01-02T00:00Z")
        p.launch(quiet)
        ended(p, quiet.run_id)
        p.engine.join()
    lines = {r.run_id: r for r in caplog.records if r.name == "scheduler.tasks.runs"}  # type: ignore[attr-defined]
    assert set(lines) == {fired.run_id, by_hand.run_id}  # the third at WARNING: not written
    ok, failed = lines[fired.run_id], lines[by_hand.run_id]
    assert ok.levelno == logging.INFO
    assert ok.getMessage().startswith(f"run {fired.run_id} of ok COMPLETED in ")
    assert ok.getMessage().endswith(" s (schedule:nightly, for 2026-01-01T00:00:00+00:00)")
    assert failed.levelno == logging.WARNING
    assert f"run {by_hand.run_id} of fails FAILED in " in failed.getMessage()
    assert "(operator:f): " in failed.getMessage()  # by hand: no "for"
    assert "exited with code 3" in failed.getMessage()


def test_a_request_enqueued_twice_launches_one_run(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        launch = request("ok", "operator:req-1")
        p.launch(launch)
        p.launch(launch)
        ended(p, launch.run_id)
        p.engine.join()
        assert len(p.runs.list_runs(program="ok")) == 1
        assert len(list((tmp_path / "logs").rglob("*.out"))) == 1


def test_a_launch_executed_again_after_a_crash_finds_its_run(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        launch = request("ok", "job:hourly/2026-01-01T05", concurrency=1)
        first = p.workflow.launch(launch)
        again = p.workflow.launch(launch)  # the crash came after the create: limit not re-counted
        assert first is not None and again == first
        ended(p, launch.run_id)
        p.engine.join()
        assert [r.run_id for r in p.runs.list_runs(program="ok")] == [launch.run_id]


def test_an_unknown_program_is_refused_with_the_known_names(tmp_path: Path) -> None:
    with (
        programs_engine(tmp_path) as p,
        pytest.raises(UnknownProgramError, match=r"'nope'.*fails, ok, slow"),
    ):
        p.workflow.validate(request("nope", "x").task())


def test_a_failing_program_ends_the_run_failed_without_retrying(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        launch = request("fails", "operator:f")
        p.launch(launch)
        run = ended(p, launch.run_id)
        p.engine.join()
    assert run.status is RunStatus.FAILED
    assert run.attempts == 1
    assert "exited with code 3" in (run.last_error or "")


def test_a_run_killed_by_an_operator_ends_killed(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        launch = request("slow", "operator:k")
        p.launch(launch)
        running = wait_for(
            lambda: (
                (r := p.runs.get(launch.run_id)) is not None and r.status is RunStatus.RUNNING and r
            )
        )
        p.engine.client.cancel_task(run_task(running.run_id, running.created_ms).key).result(10)
        run = ended(p, launch.run_id)
    assert run.status is RunStatus.KILLED
    assert run.last_error == "killed by an operator"


def test_at_the_concurrency_limit_a_launch_answers_the_requester_instead(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        first = request("slow", "schedule:a@1", concurrency=1)
        p.launch(first)
        running = wait_for(
            lambda: (r := p.runs.get(first.run_id)) is not None and r.status.is_active and r
        )
        second = request("slow", "schedule:b@1", concurrency=1, reply_to="schedule:b")
        p.launch(second)
        wait_for(lambda: p.replies.tasks)
        assert p.runs.get(second.run_id) is None
        [reply] = p.replies.tasks
        assert reply.ordering_id == "schedule:b"
        assert reply.data["reason"] == "concurrency not met"
        assert (reply.data["active"], reply.data["limit"]) == (1, 1)
        # Without a limit the same program launches beside the running one.
        third = request("slow", "operator:c")
        p.launch(third)
        wait_for(lambda: p.runs.get(third.run_id))
        for run_id in (running.run_id, third.run_id):
            run = p.runs.get(run_id)
            assert run is not None
            p.engine.client.cancel_task(run_task(run_id, run.created_ms).key).result(10)
        assert ended(p, third.run_id).status is RunStatus.KILLED


def test_a_run_task_executed_again_after_a_crash_shows_a_second_attempt(tmp_path: Path) -> None:
    with programs_engine(
        tmp_path,
    ) as p:
        launch = request("ok", "operator:crash")
        stored = p.workflow.runs.create(
            Run(
                run_id=launch.run_id,
                program="ok",
                started_by=launch.started_by,
                arguments={"table": "t"},
                status=RunStatus.PENDING,
                created_ms=1,
                requested_ms=1,
            )
        )
        task = run_task(stored.run_id, stored.created_ms)
        # The first attempt marked the run RUNNING, then its worker died.
        p.runs.transition(stored.with_status(RunStatus.RUNNING, attempts=1), {RunStatus.PENDING})
        context = ExecutionContext(task, attempt=2, partition=0)
        run = p.workflow.run(stored.run_id, task, context)
    assert run is not None
    assert (run.status, run.attempts) == (RunStatus.COMPLETED, 2)


def test_a_runs_terminal_status_reaches_an_event_handler_once(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        seen: list[ReceivedEvent] = []
        lock = threading.Lock()

        def handler(received: ReceivedEvent):  # type: ignore[no-untyped-def]
            with lock:
                seen.append(received)
            return []

        subscriber = p.subscriber(handlers=[handler]).start()
        try:
            launch = request("ok", "operator:e")
            p.launch(launch)
            ended(p, launch.run_id)
            wait_for(lambda: seen)
            p.engine.join()
            time.sleep(0.3)  # room for a duplicate to show up, if one were sent
        finally:
            subscriber.stop()
    [received] = seen
    assert received.event == ProgramStatusEvent(
        "ok", launch.run_id, RunStatus.COMPLETED, received.event.properties, received.event.time_ms
    )
    assert received.event.properties["table"] == "views"
    assert received.event.key == "program:ok"


def test_run_ids_come_from_the_request_key() -> None:
    assert request("ok", "a").run_id == request("ok", "a").run_id
    assert request("ok", "a").run_id != request("ok", "b").run_id
    assert request("ok", "a").run_id != request("fails", "a").run_id
    assert isinstance(request("ok", "a").task().key, TaskKey)


def test_a_refused_request_tried_again_later_launches_its_one_run(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        blocking = request("slow", "schedule:a@1", concurrency=1)
        first = p.workflow.launch(blocking)
        assert first is not None
        waiting = request("slow", "schedule:b@1", concurrency=1, reply_to="schedule:b")
        assert p.workflow.launch(waiting) is None
        assert p.workflow.launch(waiting) is None  # re-executed: the same answer, once
        wait_for(lambda: p.replies.tasks)
        stop_when_running(p, first)
        ended(p, first.run_id)
        later = replace(waiting, requested_at=waiting.requested_at + timedelta(seconds=1))
        assert later.task().key != waiting.task().key
        launched = p.workflow.launch(later)
        assert launched is not None and launched.run_id == waiting.run_id
        again = p.workflow.launch(later)  # re-executed: the same run, which may be running now
        assert again is not None and again.run_id == launched.run_id
        assert len(p.runs.list_runs(program="slow")) == 2
        stop_when_running(p, launched)
        ended(p, launched.run_id)
        p.engine.join()
        assert len(p.replies.tasks) == 1


def stop_when_running(p: Programs, run: Run) -> None:
    """Cancel the run's task once it runs. A task cancelled before it starts never runs, and its
    run stays PENDING: ending such a run KILLED is `scheduler runs kill`'s part (operator.kill),
    which this raw cancel is not (CI cancelled the second run before it started, once)."""
    wait_for(lambda: (r := p.runs.get(run.run_id)) is not None and r.status is RunStatus.RUNNING)
    p.engine.client.cancel_task(run_task(run.run_id, run.created_ms).key).result(10)


def pending_run(p: Programs, key: str) -> tuple[Run, Task]:
    launch = request("ok", key)
    run = p.runs.create(
        Run(
            run_id=launch.run_id,
            program="ok",
            started_by=launch.started_by,
            arguments={"table": "t"},
            status=RunStatus.PENDING,
            created_ms=1,
            requested_ms=1,
        )
    )
    return run, run_task(run.run_id, run.created_ms)


def cancelled_while_running(reason: str, *, fail: bool = True):  # type: ignore[no-untyped-def]
    def program(task: Task, context: ExecutionContext) -> None:
        context.cancel(reason)
        if fail:
            raise TaskCancelledError(f"stopped: {reason}")

    return program


def test_a_run_interrupted_by_a_revocation_stays_running_and_runs_again(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        run, task = pending_run(p, "operator:revoked")
        p.workflow.programs = cancelled_while_running("partition revoked")
        with pytest.raises(TaskCancelledError):
            p.workflow.run(run.run_id, task, ExecutionContext(task, attempt=1, partition=0))
        interrupted = p.runs.get(run.run_id)
        assert interrupted is not None
        assert (interrupted.status, interrupted.attempts) == (RunStatus.RUNNING, 1)
        p.workflow.programs = lambda task, context: None
        again = p.workflow.run(run.run_id, task, ExecutionContext(task, attempt=2, partition=0))
    assert again is not None
    assert (again.status, again.attempts) == (RunStatus.COMPLETED, 2)


def test_a_run_past_its_timeout_ends_failed_saying_so(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        run, task = pending_run(p, "operator:slow")
        p.workflow.programs = cancelled_while_running(TIMED_OUT)
        ended_run = p.workflow.run(run.run_id, task, ExecutionContext(task, attempt=1, partition=0))
    assert ended_run is not None
    assert ended_run.status is RunStatus.FAILED
    assert (ended_run.last_error or "").startswith("timed out (TaskCancelledError")


def test_a_program_that_finished_before_a_late_kill_completes(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        run, task = pending_run(p, "operator:late")
        p.workflow.programs = cancelled_while_running(CANCELLED_BY_OPERATOR, fail=False)
        ended_run = p.workflow.run(run.run_id, task, ExecutionContext(task, attempt=1, partition=0))
    assert ended_run is not None and ended_run.status is RunStatus.COMPLETED


def test_a_run_killed_while_pending_is_not_started_by_its_task(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        run, task = pending_run(p, "operator:never")
        assert p.runs.transition(run.with_status(RunStatus.KILLED), {RunStatus.PENDING})
        started: list[Task] = []
        p.workflow.programs = lambda task, context: started.append(task)
        after = p.workflow.run(run.run_id, task, ExecutionContext(task, attempt=1, partition=0))
    assert after is not None and after.status is RunStatus.KILLED
    assert started == []


def test_runs_are_counted_by_status_with_their_launch_latency(tmp_path: Path) -> None:
    from prometheus_client import REGISTRY

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = (
        sample("scheduler_runs_launched_total"),
        sample("scheduler_runs_ended_total", status="FAILED"),
        sample("scheduler_run_launch_latency_seconds_count"),
    )
    with programs_engine(tmp_path) as p:
        launch = request("fails", "operator:counted")
        p.launch(launch)
        p.launch(launch)
        ended(p, launch.run_id)
        p.engine.join()
    after = (
        sample("scheduler_runs_launched_total"),
        sample("scheduler_runs_ended_total", status="FAILED"),
        sample("scheduler_run_launch_latency_seconds_count"),
    )
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 1, 1]
    assert sample("scheduler_runs_running") == 0


def test_a_program_reads_its_own_arguments_from_the_context_as_a_spark_job_does(
    tmp_path: Path,
) -> None:
    from scheduler.programs.model import Program, ProgramKind

    seen: list[dict[str, object]] = []

    def spark_route(task: Task, context: ExecutionContext) -> None:
        seen.append(dict(context.data["args"]))  # how a registered PySpark job reads them
        assert context.data == task.data

    job = Program("rollup", ProgramKind.SPARK, {"job": "jobs:rollup"}, {"day": "20261121"})
    with programs_engine(tmp_path, programs=[job]) as p:
        p.workflow.programs = spark_route
        launched = request("rollup", "schedule:daily@1")
        p.launch(launched)
        assert ended(p, launched.run_id).status is RunStatus.COMPLETED

    assert seen == [
        {"day": "20261121", "_logical_time": "2026-01-01T00:00:00+00:00", "_schedule": "nightly"}
    ]


def test_a_launch_batch_sent_twice_creates_and_runs_each_run_once(tmp_path: Path) -> None:
    with programs_engine(tmp_path) as p:
        launches = [request("ok", f"schedule:s{i}:1:0") for i in range(5)]
        batches = launch_batches(launches, "tick:0")
        assert len(batches) == 1 and batches[0].ordering_id.startswith("launches:ok:")
        for _ in range(2):  # a tick re-executed after a crash sends the same batch again
            p.engine.client.schedule_tasks(batches).result(10)
        runs = [ended(p, launch.run_id) for launch in launches]
        p.engine.join()
        assert {r.status for r in runs} == {RunStatus.COMPLETED}
        assert all(r.arguments["table"] == "views" for r in runs)
        assert len(p.runs.list_runs(program="ok")) == 5
        assert len(list((tmp_path / "logs").rglob("*.out"))) == 5
        # Each run of the batch says where its own output went.
        assert all(r.batch is not None and r.output for r in runs)
        assert {r.worker for r in runs} == {p.engine.worker.client_id}
        assert {Path(str(r.output)).parent.name for r in runs} == {
            path.parent.name for path in (tmp_path / "logs").rglob("*.out")
        }


def test_a_launch_batch_request_with_a_limit_is_decided_alone_at_the_limit(
    tmp_path: Path,
) -> None:
    with programs_engine(tmp_path) as p:
        free = request("ok", "schedule:a:1:0")
        limited = request("ok", "schedule:b:1:0", concurrency=1, reply_to="replies:b")
        p.workflow.launch_many([limited, free])
        assert p.runs.get(free.run_id) is not None
        assert p.runs.get(limited.run_id) is None  # refused: the limit counted the free run
        ended(p, free.run_id)
        p.engine.join()


def test_launch_batches_split_at_the_batch_size_keyed_by_their_requests() -> None:
    launches = [request("ok", f"schedule:s{i}:1:0") for i in range(LAUNCH_BATCH + 1)]
    batches = launch_batches(launches, "tick:3")
    assert [len(b.data["requests"]) for b in batches] == [LAUNCH_BATCH, 1]
    assert [b.key for b in batches] == [b.key for b in launch_batches(launches, "tick:3")]
    assert [r.request_key for r in requests_of(batches[1])] == [launches[-1].request_key]
    # Other requests make other tasks: a pending batch is never overwritten by a smaller one.
    fewer = launch_batches(launches[1:], "tick:3")
    assert not {b.key for b in fewer} & {b.key for b in batches}


def test_limit_free_batches_launch_side_by_side_and_a_limited_one_in_the_programs_queue() -> None:
    free = [request("ok", f"schedule:s{i}:1:0") for i in range(LAUNCH_BATCH + 1)]
    batches = launch_batches(free, "tick:3")
    queues = [b.ordering_id for b in batches]
    assert all(q.startswith("launches:ok:") for q in queues) and len(set(queues)) == 2
    assert queues == [b.ordering_id for b in launch_batches(free, "tick:3")]  # a retry: the same
    limited = request("ok", "schedule:b:1:0", concurrency=1, reply_to="replies:b")
    (mixed,) = launch_batches([free[0], limited], "tick:3")
    assert mixed.ordering_id == "program:ok"  # where the program's active runs are counted


def test_a_launch_batch_starts_its_runs_in_one_task_and_kills_one_of_them_alone(
    tmp_path: Path,
) -> None:
    from scheduler.programs.operator import kill
    from scheduler.testing import TEST_SETTINGS

    stopped: dict[str, str | None] = {}

    def programs(task: Task, context: ExecutionContext) -> None:
        if task.data["vars"].get("wait") == "true":
            context.cancelled.wait(30)
            stopped[task.ordering_id] = context.reason
            context.raise_if_cancelled()

    published: list[ProgramStatusEvent] = []

    class Recording:
        def __init__(self, real: EventPublisher) -> None:
            self.real = real

        def publish(self, event: ProgramStatusEvent) -> Future[int]:
            published.append(event)
            return self.real.publish(event)

    with programs_engine(tmp_path) as p:
        p.workflow.programs = programs
        p.workflow.events = Recording(p.publisher)  # type: ignore[assignment]
        p.workflow.batches.kill_watch_s = 0.05
        launches = [request("ok", f"schedule:s{i}:1:0") for i in range(4)]
        victim = replace(launches[0], properties={"wait": "true"})
        launches[0] = victim
        p.engine.client.schedule_tasks(launch_batches(launches, "tick:0")).result(10)
        running = wait_for(
            lambda: (r := p.runs.get(victim.run_id)) is not None and r.status.is_active and r
        )
        assert running.batch is not None and running.batch.startswith("runs:ok:")
        others = [ended(p, launch.run_id) for launch in launches[1:]]
        assert {r.status for r in others} == {RunStatus.COMPLETED}
        assert {r.batch for r in others} == {running.batch}
        wait_for(lambda: (r := p.runs.get(victim.run_id)) and r.status is RunStatus.RUNNING)
        killed_before_start = kill(
            p.engine.client, p.runs, TEST_SETTINGS, victim.run_id, now_ms=running.created_ms + 1
        )
        assert not killed_before_start
        run = ended(p, victim.run_id)
        p.engine.join()
        assert run.status is RunStatus.KILLED
        assert run.last_error == "killed by an operator"
        assert stopped == {f"run:{victim.run_id}": CANCELLED_BY_OPERATOR}
    assert {(e.run_id, e.status) for e in published} == {
        (victim.run_id, RunStatus.KILLED),
        *((r.run_id, RunStatus.COMPLETED) for r in others),
    }
