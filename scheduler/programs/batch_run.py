"""The `run-many` task: the limit-free runs of one launch batch, started, run and ended by one
engine task instead of one `run` task each.

One attempt of the task, in its own queue (`runs:<program>:<digest>`, `launch.batch_of`):

1. Reads its runs (one `get_many`) and keeps those marked with its batch. It marks the active
   ones RUNNING (attempts + 1) in one `transition_many`, each conditional on its run being still
   PENDING or RUNNING; a run found terminal (ended by an earlier attempt, or killed while
   PENDING) only has its status event published again.
2. Runs the programs on at most `threads` threads of its own, each run under its own
   `ExecutionContext`, and writes their ends in batches (`transition_many` from RUNNING), then
   publishes their status events.
3. Every `kill_watch_s` it reads its running runs' records (one `get_many`): a run an operator
   wrote KILLED (`operator.kill`) has its own context cancelled, which stops its process or
   Spark job group; its end then reads back KILLED. The task's own cancellation cancels every
   run's context with its reason: an operator's cancel of the task or its timeout ends every
   running run KILLED or FAILED, a revocation or shutdown leaves them RUNNING and the task ends
   interrupted.

The engine runs the task again after a crash, on whichever worker then owns its partition and
on no other: it is the batch's crash-resume record. That attempt finds the runs the first ended
terminal (their events published again: consumers may see an event twice, same `event_id`) and
runs the RUNNING ones again with attempt + 1, as a re-executed `run` task does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING

from scheduler import metrics
from scheduler.executors.abc import CANCELLED_BY_OPERATOR, TIMED_OUT, ExecutionContext
from scheduler.model import Task
from scheduler.programs.events import ProgramStatusEvent
from scheduler.programs.launch import run_task
from scheduler.programs.model import ACTIVE, Run, RunStatus

if TYPE_CHECKING:
    from scheduler.programs.workflow import WorkflowExecutor

logger = logging.getLogger(__name__)

END_BATCH = 200
"""Ends written together at most (a launch batch's size)."""
END_DELAY_S = 0.05
"""How long an ended run waits for others to be written with it."""


class BatchRunner:
    """Runs `run-many` tasks for a `WorkflowExecutor` (its store, catalog, programs, events)."""

    def __init__(self, workflow: WorkflowExecutor, *, threads: int, kill_watch_s: float) -> None:
        if threads < 1:
            raise ValueError(f"batch_threads is {threads}; a batch needs at least 1 thread")
        self.workflow = workflow
        self.threads = threads
        """At most this many programs of one batch run at once."""
        self.kill_watch_s = kill_watch_s
        """How often a batch reads its running runs' records for an operator's kill."""

    def __call__(self, task: Task, context: ExecutionContext) -> list[Run]:
        """Run the batch of `task` (see the module doc); its runs as they ended or stood."""
        runs = self.workflow.runs
        run_ids = [str(run_id) for run_id in task.data["run_ids"]]
        found = runs.get_many(run_ids)
        mine = [found[i] for i in run_ids if i in found and found[i].batch == task.ordering_id]
        if len(mine) < len(run_ids):
            logger.warning(
                "batch %s: %d of its %d runs are not in the run store as its own (expired?)",
                task.ordering_id,
                len(run_ids) - len(mine),
                len(run_ids),
            )
        now = self.workflow.clock()
        starting = [
            run.with_status(
                RunStatus.RUNNING, attempts=run.attempts + 1, started_ms=now, worker=context.worker
            )
            for run in mine
            if run.status.is_active
        ]
        written = runs.transition_many(starting, ACTIVE) if starting else []
        started = [run for run, ok in zip(starting, written, strict=True) if ok]
        for run in started:
            if run.attempts == 1:
                metrics.LAUNCH_LATENCY.observe(max(0, now - run.requested_ms) / 1000)
        begun = {run.run_id for run in started}
        lost = [run.run_id for run in starting if run.run_id not in begun]
        reread = runs.get_many(lost) if lost else {}  # killed between the read and the write
        done = [reread.get(run.run_id, run) for run in mine if run.run_id not in begun]
        self._publish([run for run in done if run.status.is_terminal])
        return done + self._run(started, task, context)

    def _run(self, started: Sequence[Run], task: Task, context: ExecutionContext) -> list[Run]:
        """Run the programs of `started`, write their ends in batches and publish them."""
        if not started:
            return []
        children = {
            run.run_id: ExecutionContext(
                task, attempt=context.attempt, partition=context.partition, worker=context.worker
            )
            for run in started
        }

        def cancel_all() -> None:
            for child in children.values():
                child.cancel(context.reason or "the batch task was cancelled")

        context.on_cancel(cancel_all)
        # The batch's own threads take runs from `waiting` and put each end on `ended`: no
        # future per run and no thread started per run, which at a shared fire (thousands of
        # no-op runs in a few dozen batches at once) cost more than the runs themselves.
        waiting: SimpleQueue[Run] = SimpleQueue()
        for run in started:
            waiting.put(run)
        ended: SimpleQueue[tuple[Run, Run | None]] = SimpleQueue()

        def work() -> None:
            while True:
                try:
                    run = waiting.get_nowait()
                except Empty:
                    return
                ended.put((run, self._one(run, children[run.run_id])))

        threads = [
            threading.Thread(target=work, name=f"run-many-{n}", daemon=True)
            for n in range(min(self.threads, len(started)))
        ]
        for thread in threads:
            thread.start()
        running = {run.run_id: run for run in started}
        outcome: list[Run] = []
        unwritten: list[Run] = []
        first_end = 0.0
        next_watch = time.monotonic() + self.kill_watch_s
        try:
            while running or unwritten:
                clock = time.monotonic()
                if unwritten and (not running or clock - first_end >= END_DELAY_S):
                    outcome += self._end(unwritten)
                    unwritten = []
                if running and clock >= next_watch:
                    self._watch(running.values(), children)
                    next_watch = clock + self.kill_watch_s
                if not running:
                    continue
                timeout = next_watch - clock
                if unwritten:
                    timeout = min(timeout, first_end + END_DELAY_S - clock)
                try:
                    run, end = ended.get(timeout=max(0.0, timeout))
                except Empty:
                    continue
                del running[run.run_id]
                if end is None:  # interrupted: stays RUNNING for the next attempt
                    outcome.append(run)
                    continue
                if not unwritten:
                    first_end = time.monotonic()
                unwritten.append(end)
                if len(unwritten) >= END_BATCH:
                    outcome += self._end(unwritten)
                    unwritten = []
        except BaseException:
            # The store failed us: stop the programs; the next attempt runs them again (those
            # not begun are left RUNNING for it, as interrupted ones are).
            for child in children.values():
                child.cancel("the batch task failed")
            while True:
                try:
                    waiting.get_nowait()
                except Empty:
                    break
            raise
        finally:
            for thread in threads:
                thread.join()
        if context.reason not in (None, CANCELLED_BY_OPERATOR, TIMED_OUT):
            context.raise_if_cancelled()  # revoked or shutting down: run again elsewhere
        return outcome

    def _one(self, run: Run, context: ExecutionContext) -> Run | None:
        """Run one program (on a thread of the batch); its ended run, or None if interrupted."""
        key = run_task(run.run_id, run.created_ms).key  # the key its own task would have
        try:
            return self.workflow.run_program(run, key, context)
        except BaseException as error:  # interrupted (revoked, shutting down, batch failed)
            logger.info("run %s interrupted: %s", run.run_id, context.reason or error)
            return None

    def _watch(self, running: Iterable[Run], children: dict[str, ExecutionContext]) -> None:
        """Cancel the context of each running run an operator wrote KILLED."""
        ids = [run.run_id for run in running]
        for run_id, stored in self.workflow.runs.get_many(ids).items():
            if stored.status is RunStatus.KILLED:
                children[run_id].cancel(CANCELLED_BY_OPERATOR)

    def _end(self, ended: Sequence[Run]) -> list[Run]:
        """Write `ended` (from RUNNING) in one go; a run written otherwise meanwhile (an
        operator's kill) reads back as stored. Publishes each run's status; the runs as stored."""
        runs = self.workflow.runs
        written = runs.transition_many(ended, {RunStatus.RUNNING})
        lost = [run.run_id for run, ok in zip(ended, written, strict=True) if not ok]
        reread = runs.get_many(lost) if lost else {}
        stored = [
            run if ok else reread.get(run.run_id, run)
            for run, ok in zip(ended, written, strict=True)
        ]
        for run in stored:
            metrics.RUNS_ENDED.labels(str(run.status)).inc()
        self._publish([run for run in stored if run.status.is_terminal])
        return stored

    def _publish(self, ended: Sequence[Run]) -> None:
        events = self.workflow.events
        if events is None or not ended:
            return
        sent = [events.publish(ProgramStatusEvent.of(run)) for run in ended]
        for future in sent:
            future.result(self.workflow.timeout_s)
