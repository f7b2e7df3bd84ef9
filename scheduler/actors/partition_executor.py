"""PartitionExecutor: holds a partition's tasks until due, runs them one at a time per ordering id.

It owns the PartitionScheduler (tasks not yet due), an OrderingExecutor per ordering id and a
TaskExecutor per running attempt; only this actor's thread touches them. Attempts run on the
worker's pool; their starts and ends come back through a deque, one actor message per burst.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING

import pykka

from scheduler import metrics
from scheduler.actors.base import PartitionActor
from scheduler.actors.context import PartitionContext
from scheduler.actors.partition_scheduler import PartitionScheduler
from scheduler.actors.typed_proxy import ActorMemberMixin, proxy_method, typed_proxy
from scheduler.actors.unflushed import FLUSH_AT
from scheduler.engine.messages import AttemptFinished, AttemptStarted, ScheduledTask
from scheduler.engine.ordering_executor import OrderingExecutor
from scheduler.engine.task_executor import NOT_STARTED, TaskExecutor
from scheduler.executors.abc import CANCELLED_BY_OPERATOR, TIMED_OUT
from scheduler.model import (
    Attempt,
    AttemptOutcome,
    TaskKey,
    TaskState,
    TaskStatus,
    from_epoch_ms,
)

if TYPE_CHECKING:
    from scheduler.actors.task_persistence import TaskPersistenceProxy


#: The reason given to attempts of a partition the group gave to another worker before this one
#: let it go: its new owner may be running them already, so this one writes nothing of them.
PARTITION_LOST = "partition lost"

#: Finished keys remembered at most (see `PartitionExecutor.finished`).
FINISHED_MEMORY_MAX = 100_000


INTERRUPTED_ERROR = "its worker died or was stopped while it ran"
"""The error of an attempt closed as interrupted by a partition's next owner."""

task_log = logging.getLogger("scheduler.tasks")
"""One line per finished attempt (INFO for successes, cancels and interruptions, WARNING for a
failure retried, ERROR for a task FAILED); set this logger to WARNING to keep only failures."""

_FAILED_WORDS = {AttemptOutcome.TIMED_OUT: "timed out", AttemptOutcome.FAILED: "failed"}
_DURATIONS = {kind: metrics.TASK_DURATION.labels(kind.value) for kind in AttemptOutcome}


def _outcome_of(outcome: AttemptFinished) -> AttemptOutcome:
    if outcome.error is None:
        return AttemptOutcome.SUCCEEDED
    if outcome.cancelled == CANCELLED_BY_OPERATOR:
        return AttemptOutcome.CANCELLED
    if outcome.cancelled is not None and outcome.cancelled != TIMED_OUT:
        return AttemptOutcome.INTERRUPTED  # revoked, or the worker stopping
    if outcome.timed_out:
        return AttemptOutcome.TIMED_OUT
    return AttemptOutcome.FAILED


def _record_of(outcome: AttemptFinished, kind: AttemptOutcome, worker: str) -> Attempt:
    return Attempt(
        outcome.attempt,
        outcome.started_ms,
        outcome.ended_ms,
        kind,
        outcome.exit_code,
        outcome.error,
        worker or None,
        outcome.log_path,
    )


def _closed(
    outcome: AttemptFinished,
    record: Attempt,
    now: int,
    state: TaskState,
    next_ms: int | None = None,
) -> TaskStatus:
    """The status `state` that `outcome` leads to, carrying the attempt's `record`: with the
    error of a failure (retried or not), and the data a SUCCEEDED or FAILED task ran with."""
    error = outcome.error if state in (TaskState.RETRYING, TaskState.FAILED) else None
    data = outcome.data if state in (TaskState.SUCCEEDED, TaskState.FAILED) else None
    return TaskStatus(outcome.key, state, outcome.attempt, error, next_ms, now, data, (record,))


def _drain(
    events: collections.deque[AttemptStarted | AttemptFinished],
) -> list[AttemptStarted | AttemptFinished]:
    """Take every event in the deque, oldest first (one by one: pool threads may append)."""
    batch = []
    take = events.popleft
    try:
        while True:
            batch.append(take())
    except IndexError:
        return batch


def _seconds(record: Attempt) -> float:
    took = record.duration_ms
    return 0.0 if took is None else took / 1000


def _iso(ms: int) -> str:
    return from_epoch_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PartitionExecutor(PartitionActor):
    """Holds tasks until due, queues them per ordering id, starts each queue's head on the pool."""

    def __init__(self, ctx: PartitionContext) -> None:
        super().__init__(ctx)
        self.scheduler = PartitionScheduler(ctx, self.execute, self._fire_soon)
        self._unflushed = ctx.unflushed
        self.queues: dict[str, OrderingExecutor] = {}
        self.running: dict[TaskKey, TaskExecutor] = {}
        self.finished: collections.OrderedDict[TaskKey, int] = collections.OrderedDict()
        """Keys that reached a final state here, with the status version of that change, oldest
        first; see `execute`."""
        self.seen_checked = 0
        """The latest `checked` version of the copies received (see `_forget_finished`)."""
        self.notify_below: int | None = None
        self.draining = False
        self.idle = threading.Event()
        self.outcomes: collections.deque[AttemptStarted | AttemptFinished] = collections.deque()
        """Starts and ends reported by pool threads, not read yet (see `_report`)."""
        self.outcomes_signalled = False
        """Set by the pool thread that sent `attempts_finished`, cleared by the actor before it
        reads `outcomes`."""
        self.awaiting_lease = False
        """Set while due tasks wait for the worker's lease to hold again (see `engine.lease`)."""
        self.store_down: set[str] = set()
        """What the store refuses now ("status rows", "schedule reads"): while anything is, no
        attempt starts (the partition is in OUTAGE; see `engine.outage`)."""

    def on_start(self) -> None:
        self._me = typed_proxy(self.actor_ref, PartitionExecutorProxy)

    def on_stop(self) -> None:
        self.scheduler.stop_scheduling()
        self._left_running(self.running.values())
        self._keep_successes()

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._keep_successes()
        super().on_failure(exception_type, exception_value, traceback)

    def attach_controller(self, controller: TaskPersistenceProxy) -> None:
        """TaskPersistence, told `tick` when the tasks held drop to the level
        `notify_when_at_most` asked for, `changed` when status changes wait in the buffer, and
        `discard` for the rows of keys found final. Attached before any other message comes."""
        self._controller = controller

    # -- tasks not yet due (the PartitionScheduler) ------------------------------------------

    def schedule(self, items: list[ScheduledTask], arrived: Iterable[TaskKey] = ()) -> None:
        """Hold these tasks until due (see `PartitionScheduler.schedule`)."""
        self.scheduler.schedule(items, arrived)
        self.ctx.held.taken += len(items)  # after: `held` counts them by now

    def await_keys(self, keys: list[TaskKey]) -> None:
        self.scheduler.await_keys(keys)

    def _fire_soon(self) -> None:
        """Timer thread: the earliest held task fell due."""
        self._me.fire.defer()

    def fire(self) -> None:
        self.scheduler.fire()

    def scheduled_counts(self) -> tuple[int, int]:
        return self.scheduler.counts()

    def stop_scheduling(self) -> None:
        self.scheduler.stop_scheduling()

    # -- incoming tasks -----------------------------------------------------------------------

    def execute(self, items: list[ScheduledTask]) -> None:
        """Queue due tasks; start the head of every idle queue they touch.

        Their statuses were read when they were loaded or pushed; a finish since that read is
        caught here: `finished` has the key at a version past the copy's `checked`."""
        touched: dict[str, OrderingExecutor] = {}
        already_final: list[TaskKey] = []
        interrupted: list[TaskStatus] = []
        finished = self.finished
        for item in items:
            finished_version = finished.get(item.key)
            if finished_version is not None and item.checked < finished_version:
                already_final.append(item.key)  # finished after its status was read
                continue
            queue = self.queues.get(item.task.ordering_id)
            if queue is None:
                queue = self.queues[item.task.ordering_id] = OrderingExecutor(item.task.ordering_id)
            if item.key in self.running:
                continue  # rewritten while running: this run uses the data it started with
            queued = queue.entries.get(item.key)
            if item.running_since_ms is not None and queued is None:
                # Found RUNNING, and not running here: its worker died or was stopped.
                interrupted.append(self._interrupted(item))
            if queued is not None and queued.attempts > item.attempts:
                # Rewritten while waiting to retry: new data, same attempt count and backoff.
                item = ScheduledTask(
                    item.task, queued.attempts, queued.next_attempt_ms, item.checked
                )
            if queue.offer(item):
                self.ctx.held.executing += 1
            touched[queue.ordering_id] = queue
        if already_final:
            self._controller.discard.defer(already_final)
        if interrupted:
            self._record(interrupted)
        for queue in touched.values():
            self._pump(queue)
        checked = max((item.checked for item in items), default=0)
        kept_back = self.scheduler.oldest_kept_back()
        if kept_back is not None:  # copies held back by the scheduler arrive later
            checked = min(checked, kept_back)
        self._forget_finished(checked)

    def _interrupted(self, item: ScheduledTask) -> TaskStatus:
        """The status that closes the open attempt of a task found RUNNING as interrupted."""
        metrics.INTERRUPTED.inc()
        now = self.ctx.clock.now_ms()
        since = item.running_since_ms
        task_log.warning(
            "task %s attempt %d interrupted: it was running%s when its worker died or was "
            "stopped; running it again",
            item.key,
            item.attempts,
            "" if since is None else f" since {_iso(since)}",
            extra={"partition": self.ctx.partition, "task": str(item.key)},
        )
        record = Attempt(
            item.attempts, since, now, AttemptOutcome.INTERRUPTED, error=INTERRUPTED_ERROR
        )
        return TaskStatus(
            item.key, TaskState.PENDING, item.attempts, updated_ms=now, attempt_log=(record,)
        )

    def cancel(self, keys: Iterable[TaskKey]) -> None:
        """An operator cancelled these tasks (TaskPersistence wrote their CANCELLED status):
        forget the held ones, drop the queued ones, cancel the running attempts."""
        keys = self.scheduler.cancel(keys)
        cancelled = []
        now = self.ctx.clock.now_ms()
        for key in keys:
            queue = self.queues.get(key.ordering_id)
            if queue is None:
                continue
            queued = queue.remove(key)
            if queued is not None:
                self.ctx.held.executing -= 1
                self._pump(queue)
                attempts = queued.attempts
            elif key in self.running:
                attempt = self.running[key]
                attempt.cancel(CANCELLED_BY_OPERATOR)
                attempts = attempt.context.attempt
            else:
                continue
            cancelled.append(TaskStatus(key, TaskState.CANCELLED, attempts, None, None, now))
        if cancelled:
            # Through the buffer: a RUNNING or RETRYING waiting there would overwrite it.
            self._record(cancelled)

    # -- starting attempts ----------------------------------------------------------------------

    def _pump(self, queue: OrderingExecutor) -> None:
        if queue.busy or self.draining:
            return
        item = queue.peek()
        if item is None:
            del self.queues[queue.ordering_id]
            return
        if item.next_attempt_ms is not None and item.next_attempt_ms > self.ctx.clock.now_ms():
            me, ordering_id = self._me, queue.ordering_id
            queue.retry_timer = self.ctx.timers.call_at_ms(
                item.next_attempt_ms, lambda: me.retry_due.defer(ordering_id)
            )
            return
        if not self.ctx.lease.held():
            self._await_lease()
            return
        if self.store_down:
            return  # started again by `store_outage` once the store answers
        queue.pop()
        attempt = TaskExecutor(
            item,
            partition=self.ctx.partition,
            report=self._report,
            clock=self.ctx.clock,
            lease=self.ctx.lease,
            worker=self.ctx.worker_id,
        )
        queue.running = attempt
        self.running[item.key] = attempt
        if self.idle.is_set():  # Event.clear takes its lock: not once per task
            self.idle.clear()
        ctx = self.ctx
        attempt.start(ctx.executor, ctx.executor_service, ctx.timers, ctx.settings.task_timeout_s)

    def _await_lease(self) -> None:
        """The lease lapsed: start nothing until the poll loop confirms it again, by which time
        a revocation has reached this partition if the group moved it."""
        if self.awaiting_lease:
            return
        self.awaiting_lease = True
        self.ctx.log.warning(
            "not starting due tasks: the worker's last poll was %.1f s ago (past the %g s "
            "lease), so the group may have given this partition away; waiting for the poll "
            "loop to hear from the group",
            self.ctx.lease.age_s(),
            self.ctx.lease.term_s,
        )
        me = self._me

        def wake() -> None:
            try:
                me.lease_held.defer()
            except pykka.ActorDeadError:
                pass  # the partition left meanwhile

        self.ctx.lease.when_held(wake)

    def store_outage(self, what: str, down: bool) -> None:
        """The store refused `what` (`down`), or took it again: no attempt starts while
        anything is refused."""
        if down:
            self.store_down.add(what)
            return
        self.store_down.discard(what)
        if not self.store_down:
            self._pump_all()

    def lease_held(self) -> None:
        """The poll loop confirmed the lease: start the heads of the queues that waited."""
        self.awaiting_lease = False
        self._pump_all()

    def _pump_all(self) -> None:
        for queue in list(self.queues.values()):
            self._pump(queue)

    def retry_due(self, ordering_id: str) -> None:
        """Timer callback: a retry backoff of this ordering id ended."""
        queue = self.queues.get(ordering_id)
        if queue is not None:
            queue.retry_timer = None
            self._pump(queue)

    # -- outcomes ---------------------------------------------------------------------------

    def _report(self, outcome: AttemptStarted | AttemptFinished) -> None:
        """Called on a pool thread: hand the event to the actor, one message per burst.

        No lock: a deque's `append` and `popleft` are atomic, and the actor clears the flag
        before it reads, so an event appended after its read sends a message of its own (two
        threads may both send one; the second reads nothing)."""
        self.outcomes.append(outcome)
        if self.outcomes_signalled:
            return
        self.outcomes_signalled = True
        try:
            self._me.attempts_finished.defer()
        except pykka.ActorDeadError:
            self._keep_successes()

    def _keep_successes(self) -> None:
        """Once this actor is gone: keep the successes among the outcomes no one will read, for
        the next tree on this worker to write instead of running them again (other outcomes
        are dropped: their tasks run again). pykka drops a stopping actor's mailbox, so the
        outcomes signalled just before the stop are read here or not at all."""
        self.outcomes_signalled = False  # the next outcome comes here too
        batch = _drain(self.outcomes)
        worker, now = self.ctx.worker_id, self.ctx.clock.now_ms()
        self._unflushed.put(
            _closed(
                event, _record_of(event, AttemptOutcome.SUCCEEDED, worker), now, TaskState.SUCCEEDED
            )
            for event in batch
            if isinstance(event, AttemptFinished) and event.error is None
        )

    def attempts_finished(self) -> None:
        self.outcomes_signalled = False  # first: see `_report`
        batch = _drain(self.outcomes)
        # An attempt that started and ended within one burst needs no RUNNING status.
        ended = {(e.key, e.attempt) for e in batch if isinstance(e, AttemptFinished)}
        statuses = []
        for event in batch:
            if isinstance(event, AttemptStarted):
                if event.attempt == 1:
                    metrics.FIRING_LAG.observe(
                        max(0, event.started_ms - event.key.scheduled_ms) / 1000
                    )
                if (event.key, event.attempt) in ended:
                    continue
                attempt = self.running.get(event.key)
                if attempt is not None and attempt.context.reason == CANCELLED_BY_OPERATOR:
                    continue  # cancelled before its start was read: CANCELLED stands
                record = Attempt(event.attempt, event.started_ms, worker=self.ctx.worker_id)
                statuses.append(
                    TaskStatus(
                        event.key,
                        TaskState.RUNNING,
                        event.attempt,
                        updated_ms=event.started_ms,
                        attempt_log=(record,),
                    )
                )
            elif (status := self._finish(event)) is not None:
                statuses.append(status)
        if statuses:
            self._record(statuses)
        if not self.running:
            self.idle.set()
        if self.notify_below is not None and self.ctx.held.executing <= self.notify_below:
            self.notify_below = None
            self._controller.tick.defer()

    def _finish(self, outcome: AttemptFinished) -> TaskStatus | None:
        attempt = self.running.pop(outcome.key)
        queue = self.queues[outcome.key.ordering_id]
        queue.running = None
        if outcome.cancelled == NOT_STARTED:
            reason = attempt.context.reason
            if reason is None:
                self._not_started(queue, attempt.item)
                return None
            # Cancelled while the pool was refusing it: that cancellation is its outcome.
            outcome = outcome._replace(cancelled=reason, error=f"cancelled: {reason}")
        item, key, now = attempt.item, outcome.key, self.ctx.clock.now_ms()
        kind = _outcome_of(outcome)
        record = _record_of(outcome, kind, self.ctx.worker_id)
        took = _seconds(record)
        if outcome.started_ms is not None:
            _DURATIONS[kind].observe(took)
        retry = self.ctx.settings.retry
        status: TaskStatus | None
        if kind is AttemptOutcome.SUCCEEDED:
            metrics.EXECUTED.inc()
            if task_log.isEnabledFor(logging.INFO):  # the hot path: no fields built for nothing
                task_log.info(
                    "task %s succeeded in %.3f s (attempt %d)",
                    *(key, took, outcome.attempt),
                    extra=self._extra(record, key),
                )
            status = _closed(outcome, record, now, TaskState.SUCCEEDED)
        elif kind is AttemptOutcome.CANCELLED:
            # Written CANCELLED when the command arrived; once more with the attempt, after
            # anything of this attempt the buffer may still hold.
            task_log.info(
                "task %s cancelled after %.3f s (attempt %d)",
                *(key, took, outcome.attempt),
                extra=self._extra(record, key),
            )
            status = _closed(outcome, record, now, TaskState.CANCELLED)
        elif kind is AttemptOutcome.INTERRUPTED:
            # Revoked or stopping: the row stays for the next owner, which runs it again.
            task_log.info(
                "task %s interrupted after %.3f s (attempt %d): %s; it runs again",
                *(key, took, outcome.attempt, outcome.cancelled),
                extra=self._extra(record, key),
            )
            status = self._stopped(key, outcome.attempt, outcome.cancelled, record, now)
        elif outcome.attempt < retry.max_attempts and not outcome.permanent:
            metrics.RETRIED.inc()
            delay = retry.delay_s(outcome.attempt, self.ctx.rng.random())
            next_ms = now + int(delay * 1000)
            task_log.warning(
                "task %s %s in %.3f s (attempt %d of %d), retrying in %.1fs: %s",
                *(key, _FAILED_WORDS[kind], took, outcome.attempt, retry.max_attempts, delay),
                outcome.error,
                extra=self._extra(record, key),
            )
            queue.offer(ScheduledTask(item.task, outcome.attempt, next_ms, self._unflushed.version))
            self._pump(queue)
            return _closed(outcome, record, now, TaskState.RETRYING, next_ms)
        else:
            metrics.FAILED.inc()
            why = "not retried, the failure is permanent" if outcome.permanent else "the last"
            task_log.error(
                "task %s FAILED: attempt %d %s in %.3f s (%s): %s",
                *(key, outcome.attempt, _FAILED_WORDS[kind], took, why, outcome.error),
                extra=self._extra(record, key),
            )
            status = _closed(outcome, record, now, TaskState.FAILED)
        self.ctx.held.executing -= 1
        self._pump(queue)
        return status

    def _not_started(self, queue: OrderingExecutor, item: ScheduledTask) -> None:
        """The pool refused to start `item` (the lease lapsed after the hand-off): it never
        began, so nothing is recorded; it goes back to the head of its queue."""
        task_log.info(
            "task %s not started: the worker's lease lapsed before the pool reached it; it "
            "waits for the lease",
            item.key,
        )
        if item.key not in queue.entries:  # a copy queued meanwhile has the newer data
            queue.offer(item)
        self._pump(queue)

    def _extra(self, record: Attempt, key: TaskKey) -> dict[str, object]:
        """The fields of a task's log line, for JSON logs (`extra`)."""
        return {
            "partition": self.ctx.partition,
            "task": str(key),
            "attempt": record.number,
            "outcome": record.outcome.value,
            "duration_s": _seconds(record),
        }

    def _stopped(
        self, key: TaskKey, attempt: int, reason: str | None, record: Attempt, now: int
    ) -> TaskStatus | None:
        """The status of a task whose attempt this worker stopped: PENDING with the attempt
        closed as interrupted. None for a lost partition (its new owner writes its statuses),
        and when a later attempt of it is already recorded (a restarted tree runs it again)."""
        if reason == PARTITION_LOST:
            return None
        later = self._unflushed.peek([key]).get(key)
        if later is not None and later.attempts > attempt:
            return None
        error = f"attempt {attempt} interrupted ({reason}); it runs again"
        return TaskStatus(key, TaskState.PENDING, attempt, error, None, now, attempt_log=(record,))

    def _record(self, statuses: list[TaskStatus]) -> None:
        """Make these changes visible to lookups now, and have TaskPersistence write them.

        Into the shared buffer, not TaskPersistence's mailbox, where a rewrite of a finished
        key pushed meanwhile would find no final status. The put's version is the finish's:
        `execute` refuses copies checked before it."""
        version = self._unflushed.put(statuses)
        for status in statuses:
            if status.state.is_final:
                self._remember_finished(status.key, version)
        if not self._unflushed.wake_writer(FLUSH_AT):
            return
        try:
            self._controller.changed.defer()
        except pykka.ActorDeadError:
            pass  # the tree is going down; the next tree writes the buffer

    def _remember_finished(self, key: TaskKey, version: int) -> None:
        finished = self.finished
        finished[key] = version
        finished.move_to_end(key)  # oldest first
        while len(finished) > FINISHED_MEMORY_MAX:
            finished.popitem(last=False)

    def _forget_finished(self, checked: int) -> None:
        """Drop the finishes no copy still on its way can have missed.

        Copies of finished keys reach this actor in the order of their `checked` versions
        (TaskPersistence hands them on in that order, the scheduler passes due keys straight
        on, and a copy it keeps back holds `checked` down to its own): once one checked at
        `checked` arrived, a finish up to `checked` was seen by every later one."""
        if checked <= self.seen_checked:
            return
        self.seen_checked = checked
        finished = self.finished
        while finished and next(iter(finished.values())) <= checked:
            finished.popitem(last=False)

    # -- control ------------------------------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        """(tasks held: queued, running or waiting to retry; attempts running)."""
        return self.ctx.held.executing, len(self.running)

    def notify_when_at_most(self, threshold: int) -> None:
        """Tell the controller once the tasks held drop to `threshold` (memory bound refill)."""
        if self.ctx.held.executing <= threshold:
            self._controller.tick.defer()
        else:
            self.notify_below = threshold

    def begin_drain(self) -> threading.Event:
        """Start nothing more; the returned event is set once no attempt is running."""
        self.draining = True
        for queue in self.queues.values():
            if queue.retry_timer is not None:
                queue.retry_timer.cancel()
                queue.retry_timer = None
        if not self.running:
            self.idle.set()
        return self.idle

    def cancel_running(self, reason: str) -> list[TaskKey]:
        """Cancel every running attempt (revocation past its deadline, or shutdown); their keys."""
        for attempt in list(self.running.values()):
            attempt.cancel(reason)
        return list(self.running)

    def running_keys(self) -> list[TaskKey]:
        return list(self.running)

    def _left_running(self, attempts: Iterable[TaskExecutor]) -> None:
        """The tree goes down with these attempts still running: write them as if they had
        ended, PENDING again (interrupted), or CANCELLED once more for an operator's cancel."""
        now = self.ctx.clock.now_ms()
        worker = self.ctx.worker_id or None
        statuses = []
        for attempt in attempts:
            key, number = attempt.context.key, attempt.context.attempt
            reason = attempt.context.reason or "partition stopped"
            cancelled = reason == CANCELLED_BY_OPERATOR
            kind = AttemptOutcome.CANCELLED if cancelled else AttemptOutcome.INTERRUPTED
            record = Attempt(number, None, now, kind, None, f"cancelled: {reason}", worker)
            status = (
                TaskStatus(key, TaskState.CANCELLED, number, updated_ms=now, attempt_log=(record,))
                if cancelled
                else self._stopped(key, number, reason, record, now)
            )
            if status is not None:
                statuses.append(status)
        self._unflushed.put(statuses)


class PartitionExecutorProxy(ActorMemberMixin, pykka.ActorProxy[PartitionExecutor]):
    """What the partition's other parts, and the executor's own timers and pool threads, send it."""

    attach_controller = proxy_method(PartitionExecutor.attach_controller)
    schedule = proxy_method(PartitionExecutor.schedule)
    await_keys = proxy_method(PartitionExecutor.await_keys)
    fire = proxy_method(PartitionExecutor.fire)
    scheduled_counts = proxy_method(PartitionExecutor.scheduled_counts)
    stop_scheduling = proxy_method(PartitionExecutor.stop_scheduling)
    cancel = proxy_method(PartitionExecutor.cancel)
    store_outage = proxy_method(PartitionExecutor.store_outage)
    lease_held = proxy_method(PartitionExecutor.lease_held)
    retry_due = proxy_method(PartitionExecutor.retry_due)
    attempts_finished = proxy_method(PartitionExecutor.attempts_finished)
    counts = proxy_method(PartitionExecutor.counts)
    notify_when_at_most = proxy_method(PartitionExecutor.notify_when_at_most)
    begin_drain = proxy_method(PartitionExecutor.begin_drain)
    cancel_running = proxy_method(PartitionExecutor.cancel_running)
    running_keys = proxy_method(PartitionExecutor.running_keys)
