"""The `workflow` executor route: launches and runs programs as engine tasks, nothing else.

Four operations, each a task:

* `launch` (queue `program:<name>`, one writer per program): if the run of this request exists
  already (the task is re-executed after a crash), only make sure its run task is enqueued.
  Otherwise count the program's active runs; at the request's concurrency limit, answer the
  requester with a `launch-refused` task in its own queue and launch nothing. Else write the run
  PENDING (id from the request key; a conditional create) and enqueue its run task.
* `run` (queue `run:<run_id>`, so runs of a program execute in parallel): mark the run RUNNING
  (attempts + 1: a worker crash mid-run shows as attempt 2), run the program through the
  worker's executor routes (spark / spark-submit / command), end it COMPLETED, FAILED (the
  program failed: no launch retries, as the seeds ship) or KILLED (an operator cancelled the
  task), then publish its program-status event. A run found already terminal (the task ran to
  its end and the worker died before the engine recorded it) only publishes its event again.
* `launch-many` (queue `program:<name>`): `launch` for a batch of requests (a tick's fires of
  one program). The limit-free runs are written PENDING in one store write, each marked with
  the batch it belongs to, and started by ONE `run-many` task (queue `runs:<program>:<digest>`,
  `batch_of`; see `batch_run.py`): it does for each of its runs what `run` does, with the starts
  and the ends written in batches and the programs on a bounded set of threads. A request with a
  concurrency limit is launched alone, after them, as by `launch`.
* `launch-refused`: the default reply route for requesters without their own; it logs.

Every step is safe to repeat: deterministic ids and keys, conditional writes, and a publish
that consumers may see twice (same `event_id`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from scheduler import metrics
from scheduler.client import SchedulerClient
from scheduler.engine.clock import now_ms
from scheduler.errors import TaskDataError
from scheduler.executors.abc import (
    CANCELLED_BY_OPERATOR,
    TIMED_OUT,
    ExecutionContext,
    Executor,
)
from scheduler.model import Task, TaskKey, to_epoch_ms
from scheduler.programs.abc import RunStore
from scheduler.programs.catalog import ProgramCatalog
from scheduler.programs.events import EventPublisher, ProgramStatusEvent, publishing_with
from scheduler.programs.launch import (
    LaunchRequest,
    batch_of,
    requests_of,
    run_many_task,
    run_task,
)
from scheduler.programs.model import ACTIVE, Run, RunStatus, StarterKind

logger = logging.getLogger(__name__)

_ERROR_CHARS = 2000


class WorkflowExecutor:
    """Runs `launch`, `run` and `launch-refused` tasks (route name: `workflow`)."""

    def __init__(
        self,
        *,
        catalog: ProgramCatalog,
        runs: RunStore,
        client: SchedulerClient,
        programs: Executor,
        events: EventPublisher | None = None,
        clock: Callable[[], int] = now_ms,
        timeout_s: float = 60.0,
        batch_threads: int = 16,
        kill_watch_s: float = 1.0,
    ) -> None:
        from scheduler.programs.batch_run import BatchRunner

        self.catalog = catalog
        self.runs = runs
        self.client = client
        """Enqueues run tasks and replies; its grace window must admit a run task's time
        (the run's creation) when a launch is re-executed late."""
        self.programs = programs
        """The executor routes programs run on (a `RoutingExecutor` of spark, command...)."""
        self.events = events
        self.clock = clock
        self.timeout_s = timeout_s
        self.batches = BatchRunner(self, threads=batch_threads, kill_watch_s=kill_watch_s)
        """Runs the `run-many` tasks: at most `batch_threads` programs at once per task, its
        running runs' records read every `kill_watch_s` for an operator's kill."""

    def validate(self, task: Task) -> None:
        """Enqueue-time check: a launch names a known program."""
        if task.data.get("op") in ("launch", "launch-many"):
            self.catalog.get(str(task.data.get("program")))

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        op = task.data.get("op")
        if op == "launch":
            self.launch(LaunchRequest.from_task(task))
        elif op == "launch-many":
            self.launch_many(requests_of(task))
        elif op == "run":
            self.run(str(task.data["run_id"]), task, context)
        elif op == "run-many":
            self.batches(task, context)
        elif op == "launch-refused":
            logger.info("launch of %s refused: %s", task.data.get("program"), dict(task.data))
        else:
            raise TaskDataError(
                f"task {task.key} asks the workflow executor for op {op!r}; "
                "use launch, launch-many, run, run-many or launch-refused"
            )

    # -- launch -----------------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> Run | None:
        """Launch the run of `request`, or refuse it at the concurrency limit (None)."""
        self.catalog.get(request.program)  # an unknown program fails the launch before any read
        stored = self.runs.get(request.run_id)
        if stored is None:
            if request.concurrency is not None:
                active = self.runs.active(request.program)
                if len(active) >= request.concurrency:
                    self._refuse(request, len(active))
                    return None
            stored = self.runs.create(self._pending_run(request, self.clock()))
            metrics.RUNS_LAUNCHED.inc()
        self.client.schedule_task(run_task(stored.run_id, stored.created_ms)).result(self.timeout_s)
        return stored

    def launch_many(self, requests: Sequence[LaunchRequest]) -> None:
        """`launch` for requests of one program in its queue, batched: the limit-free runs
        written PENDING in one `RunStore.create_many` (conditional, as `create`), marked with
        their batch, and one `run-many` task sent for those the batch made. A request with a
        concurrency limit is launched alone (`launch`), after them."""
        free = [request for request in requests if request.concurrency is None]
        limited = [request for request in requests if request.concurrency is not None]
        if free:
            batch = batch_of(free[0].program, [request.run_id for request in free])
            now = self.clock()
            made = [replace(self._pending_run(request, now), batch=batch) for request in free]
            stored = self.runs.create_many(made)
            metrics.RUNS_LAUNCHED.inc(
                sum(1 for run, kept in zip(made, stored, strict=True) if run == kept)
            )
            # A run stored before (by another launch, or another batch of an earlier try of
            # the requester) is started by the task that made it: never by two tasks at once.
            mine = [run for run in stored if run.batch == batch]
            tasks = [run_task(run.run_id, run.created_ms) for run in stored if run.batch is None]
            if mine:
                first = min(run.created_ms for run in mine)
                tasks.append(run_many_task(batch, [run.run_id for run in mine], first))
            if tasks:
                self.client.schedule_tasks(tasks).result(self.timeout_s)
        for request in limited:  # after the batch: its runs count against their limits
            self.launch(request)

    def _pending_run(self, request: LaunchRequest, now: int) -> Run:
        """The PENDING run `request` asks for, its arguments over its program's defaults."""
        program = self.catalog.get(request.program)
        return Run(
            run_id=request.run_id,
            program=request.program,
            started_by=request.started_by,
            arguments=request.arguments(program.properties),
            status=RunStatus.PENDING,
            created_ms=now,
            requested_ms=to_epoch_ms(request.requested_at),
            request_key=request.request_key,
        )

    def _refuse(self, request: LaunchRequest, active: int) -> None:
        metrics.LAUNCHES_REFUSED.inc()
        logger.info(
            "not launching %s for %s: %d active runs, concurrency limit %s",
            request.program,
            request.request_key,
            active,
            request.concurrency,
        )
        if request.reply_to is None:
            return
        # Keyed by the request's own time: a launch re-executed after a crash answers once.
        reply = Task(
            request.reply_to,
            request.requested_at,
            f"launch-refused:{request.request_key}",
            {
                "executor": request.reply_executor,
                "op": "launch-refused",
                "reason": "concurrency not met",
                "program": request.program,
                "request_key": request.request_key,
                "run_id": request.run_id,
                "active": active,
                "limit": request.concurrency,
            },
        )
        self.client.schedule_task(reply).result(self.timeout_s)

    # -- run --------------------------------------------------------------------------------

    def run(self, run_id: str, task: Task, context: ExecutionContext) -> Run | None:
        """Execute run `run_id` to a terminal status and publish it (see the module doc)."""
        run = self.runs.get(run_id)
        if run is None:
            logger.warning("run %s is not in the run store (expired?); nothing to run", run_id)
            return None
        if run.status.is_active:
            started = run.with_status(
                RunStatus.RUNNING,
                attempts=run.attempts + 1,
                started_ms=self.clock(),
                worker=context.worker,
            )
            if self.runs.transition(started, ACTIVE):
                if run.attempts == 0:
                    metrics.LAUNCH_LATENCY.observe(
                        max(0, (started.started_ms or 0) - run.requested_ms) / 1000
                    )
                run = self._execute(started, task, context)
            else:
                run = self.runs.get(run_id) or run  # killed while PENDING: it is terminal now
        if run.status.is_terminal:
            self._publish(run)
        return run

    def _execute(self, run: Run, task: Task, context: ExecutionContext) -> Run:
        ended = self.run_program(run, task.key, context)
        if not self.runs.transition(ended, {RunStatus.RUNNING}):
            ended = self.runs.get(run.run_id) or ended
        metrics.RUNS_ENDED.labels(str(ended.status)).inc()
        return ended

    def run_program(self, run: Run, key: TaskKey, context: ExecutionContext) -> Run:
        """Run the program of RUNNING `run` under `key` and `context`; the run as it ended (not
        written). Raises when the attempt was interrupted (revoked, shutting down): the run
        stays RUNNING and its next attempt runs it again."""
        program = self.catalog.get(run.program)
        inner = Task.from_key(key, program.task_data(run.arguments))
        error: BaseException | None = None
        metrics.RUNS_RUNNING.inc()
        # The program sees its own task through the context too (a Spark job reads its
        # arguments from `context.data["args"]`); the run task's is put back afterwards.
        outer, context.task = context.task, inner
        try:
            with publishing_with(self.events):
                self.programs(inner, context)
        except BaseException as failure:  # the program's failure is the run's data
            error = failure
        finally:
            context.task = outer
            metrics.RUNS_RUNNING.dec()
        reason = context.reason
        changes: dict[str, Any] = {"ended_ms": self.clock()}
        if context.log_path is not None:  # set by the executor that wrote the output
            changes["output"] = context.log_path
        if error is None:
            # The program finished, whatever cancellation came too late to stop it.
            status = RunStatus.COMPLETED
        elif reason == CANCELLED_BY_OPERATOR:
            status, changes["last_error"] = RunStatus.KILLED, "killed by an operator"
        elif reason is None or reason == TIMED_OUT:
            status, changes["last_error"] = RunStatus.FAILED, _words(error, reason)
        else:
            # Revoked or shutting down: the next owner runs the task again (attempt + 1).
            raise error
        ended = run.with_status(status, **changes)
        _log_end(ended)
        return ended

    def _publish(self, run: Run) -> None:
        if self.events is not None:
            self.events.publish(ProgramStatusEvent.of(run)).result(self.timeout_s)


run_log = logging.getLogger("scheduler.tasks.runs")
"""The line per ended run: under `scheduler.tasks`, so `task_log_level` (WARNING: failures
only) governs it as it does the line per task attempt."""


def _log_end(run: Run) -> None:
    """`run 2c03b652-... of hello COMPLETED in 0.004 s (schedule:every10, for 2026-11-29...)`:
    the run an operator looks up with `scheduler runs show`, not the engine tasks that ran it."""
    failed = run.status is RunStatus.FAILED
    if not run_log.isEnabledFor(logging.WARNING if failed else logging.INFO):
        return  # the hot path of a shared fire: nothing built for a line not written
    took = (run.ended_ms or 0) - (run.started_ms or run.ended_ms or 0)
    # The fire or partition a schedule's or batch job's run is for; a run by hand is for now.
    logical = run.arguments.get("_logical_time")
    by_hand = run.started_by.kind is StarterKind.OPERATOR
    why = f"{run.started_by}" + (f", for {logical}" if logical and not by_hand else "")
    run_log.log(
        logging.WARNING if failed else logging.INFO,
        "run %s of %s %s in %.3f s (%s)%s",
        *(run.run_id, run.program, run.status, took / 1000, why),
        f": {run.last_error}" if failed else "",
        extra={
            "run_id": run.run_id,
            "program": run.program,
            "status": str(run.status),
            "started_by": str(run.started_by),
            "duration_s": took / 1000,
        },
    )


def _words(error: BaseException, reason: str | None) -> str:
    said = f"{type(error).__name__}: {error}"
    if reason == TIMED_OUT:
        said = f"timed out ({said})"
    return said[:_ERROR_CHARS]
