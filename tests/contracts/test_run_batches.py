"""The `run-many` task (`scheduler/programs/batch_run.py`) over each run store (SQLite and
Cassandra, the `run_store` fixture): each run of a batch ends once across a re-executed task, and
an operator's kill stops its run alone."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import pytest

from scheduler.errors import TaskCancelledError
from scheduler.executors.abc import CANCELLED_BY_OPERATOR, ExecutionContext
from scheduler.model import Task
from scheduler.programs import batch_run
from scheduler.programs.abc import RunStore
from scheduler.programs.catalog import ProgramCatalog
from scheduler.programs.events import Event, ProgramStatusEvent
from scheduler.programs.launch import batch_of, run_many_task
from scheduler.programs.model import Program, ProgramKind, Run, RunStatus
from scheduler.programs.operator import kill_batch_run
from scheduler.programs.workflow import WorkflowExecutor
from tests.contracts.test_run_store_contract import BASE_MS, a_run

PROGRAM = Program("clean", ProgramKind.COMMAND, {"argv": ["true"]})
SIZE = 6


class Killed(Exception):
    """What the tests' crashes raise."""


class Store:
    """A run store that dies at the `nth` call of `method` and counts the runs' terminal
    writes."""

    def __init__(self, runs: RunStore, method: str = "", nth: int = 0) -> None:
        self.runs = runs
        self.method, self.nth, self.calls = method, nth, 0
        self.ends: list[str] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.runs, name)
        if name == "transition_many":
            real = self._counting(real)
        if name != self.method:
            return real

        def dying(*args: Any, **kw: Any) -> Any:
            self.calls += 1
            if self.calls == self.nth:
                raise Killed(f"killed in {name}")
            return real(*args, **kw)

        return dying

    def _counting(self, real: Any) -> Any:
        def counted(runs: list[Run], expected: Any) -> list[bool]:
            written: list[bool] = real(runs, expected)
            pairs = zip(runs, written, strict=True)
            self.ends += [r.run_id for r, ok in pairs if ok and r.status.is_terminal]
            return written

        return counted


class Events:
    """A publisher recording the events, dying at its `nth` publish if asked."""

    def __init__(self, nth: int = 0) -> None:
        self.nth, self.calls = nth, 0
        self.events: list[ProgramStatusEvent] = []

    def publish(self, event: Event) -> Future[int]:
        self.calls += 1
        if self.calls == self.nth:
            raise Killed("killed in publish")
        assert isinstance(event, ProgramStatusEvent)
        self.events.append(event)
        done: Future[int] = Future()
        done.set_result(0)
        return done


class Programs:
    """The program route: records each call; a run whose `wait` argument is set runs until its
    context is cancelled."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.reasons: dict[str, str | None] = {}
        self.lock = threading.Lock()

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        run_id = task.ordering_id.removeprefix("run:")
        with self.lock:
            self.calls.append(run_id)
        if task.data["vars"].get("wait") == "true":
            context.cancelled.wait(30)
            self.reasons[run_id] = context.reason
            context.raise_if_cancelled()


def workflow(runs: Any, events: Events, programs: Programs) -> WorkflowExecutor:
    return WorkflowExecutor(
        catalog=ProgramCatalog([PROGRAM]),
        runs=runs,
        client=None,  # type: ignore[arg-type]  # a batch sends no task
        programs=programs,
        events=events,  # type: ignore[arg-type]
        batch_threads=2,
        kill_watch_s=0.02,
    )


def a_batch(run_store: RunStore, **arguments: object) -> tuple[list[Run], Task]:
    runs = [a_run(request=f"schedule:s{i}@1") for i in range(SIZE)]
    batch = batch_of("clean", [r.run_id for r in runs])
    runs = [_with(r, batch, arguments) for r in runs]
    run_store.create_many(runs)
    return runs, run_many_task(batch, [r.run_id for r in runs], BASE_MS)


def _with(run: Run, batch: str, arguments: dict[str, object]) -> Run:
    return replace(run, batch=batch, arguments={**run.arguments, **arguments})


def attempt(executor: WorkflowExecutor, task: Task, number: int) -> list[Run]:
    return executor.batches(task, ExecutionContext(task, attempt=number, partition=0))


@pytest.mark.parametrize(
    ("method", "nth"),
    [("get_many", 1), ("transition_many", 1), ("transition_many", 2), ("transition_many", 3)],
)
def test_a_batch_run_again_after_a_crash_ends_each_run_once(
    run_store: RunStore, method: str, nth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ends written two at a time: the third write dies with two runs ended and four not.
    monkeypatch.setattr(batch_run, "END_BATCH", 2)
    runs, task = a_batch(run_store)
    store, events, programs = Store(run_store, method, nth), Events(), Programs()
    executor = workflow(store, events, programs)
    with pytest.raises(Killed):
        attempt(executor, task, 1)  # the worker dies here; the engine runs the task again
    store.method = ""
    attempt(executor, task, 2)
    attempt(executor, task, 3)  # and once more, after it completed
    stored = run_store.get_many([r.run_id for r in runs])
    assert {r.status for r in stored.values()} == {RunStatus.COMPLETED}
    assert sorted(store.ends) == sorted(r.run_id for r in runs)  # one end written per run
    for run in stored.values():
        # A program ran once per attempt that started its run, never after its end.
        assert programs.calls.count(run.run_id) == run.attempts
    assert {e.run_id for e in events.events} == {r.run_id for r in runs}
    assert {e.status for e in events.events} == {RunStatus.COMPLETED}


def test_a_batch_that_died_publishing_publishes_again_without_running_again(
    run_store: RunStore,
) -> None:
    runs, task = a_batch(run_store)
    dying, programs = Events(nth=1), Programs()
    with pytest.raises(Killed):
        attempt(workflow(run_store, dying, programs), task, 1)
    events = Events()
    attempt(workflow(run_store, events, programs), task, 2)
    assert sorted(programs.calls) == sorted(r.run_id for r in runs)
    assert sorted(e.run_id for e in events.events) == sorted(r.run_id for r in runs)


def test_killing_one_run_of_a_running_batch_stops_only_it(run_store: RunStore) -> None:
    runs, task = a_batch(run_store)
    victim = runs[0]
    run_store.transition(  # the victim's program runs until it is stopped
        _with(victim, victim.batch or "", {"wait": True}), {RunStatus.PENDING}
    )
    events, programs = Events(), Programs()
    executor = workflow(run_store, events, programs)
    ran: list[list[Run]] = []
    batch = threading.Thread(target=lambda: ran.append(attempt(executor, task, 1)))
    batch.start()
    deadline = threading.Event()
    while victim.run_id not in programs.calls and not deadline.wait(0.01):
        pass
    assert kill_batch_run(run_store, victim.run_id, now_ms=BASE_MS + 1)
    batch.join(30)
    assert not batch.is_alive()
    stored = run_store.get_many([r.run_id for r in runs])
    assert stored[victim.run_id].status is RunStatus.KILLED
    assert stored[victim.run_id].last_error == "killed by an operator"
    assert programs.reasons == {victim.run_id: CANCELLED_BY_OPERATOR}
    assert {stored[r.run_id].status for r in runs[1:]} == {RunStatus.COMPLETED}
    published = {e.run_id: e.status for e in events.events}
    assert published == {r.run_id: stored[r.run_id].status for r in runs}
    assert not kill_batch_run(run_store, victim.run_id, now_ms=BASE_MS + 2)  # ended


def test_a_revoked_batch_leaves_its_runs_running_for_its_next_attempt(
    run_store: RunStore,
) -> None:
    runs, task = a_batch(run_store, wait=True)
    events, programs = Events(), Programs()
    executor = workflow(run_store, events, programs)
    context = ExecutionContext(task, attempt=1, partition=0)
    failed: list[BaseException] = []

    def first() -> None:
        try:
            executor.batches(task, context)
        except TaskCancelledError as error:
            failed.append(error)

    batch = threading.Thread(target=first)
    batch.start()
    stop = threading.Event()
    while len(programs.calls) < 2 and not stop.wait(0.01):  # 2 threads: 2 programs at once
        pass
    context.cancel("partition revoked")
    batch.join(30)
    assert failed and not batch.is_alive()
    stored = run_store.get_many([r.run_id for r in runs])
    assert {r.status for r in stored.values()} <= {RunStatus.RUNNING, RunStatus.PENDING}
    assert events.events == []
    for run in stored.values():  # the next attempt runs them without waiting
        run_store.transition(_with(run, run.batch or "", {"wait": False}), {run.status})
    attempt(executor, task, 2)
    ended = run_store.get_many([r.run_id for r in runs])
    assert {r.status for r in ended.values()} == {RunStatus.COMPLETED}
    assert {r.attempts for r in ended.values() if r.run_id in programs.reasons} == {2}
