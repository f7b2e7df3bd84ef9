"""TaskPersistence: the single writer of one partition's rows; keeps the read checkpoint.

It writes the schedule rows of every polled batch, applies the operators' commands, does the
loads its ThroughputController decides, and writes the status changes the PartitionExecutor
puts in the shared buffer (the seed's TaskCompletionTracker: `flush`). A cancel goes through
that same buffer, so a RUNNING waiting there cannot overwrite it. Status changes are written
in batches every `status_flush_ms`; lookups read the buffer before the store.

The read checkpoint: every schedule row up to it has been handed to the PartitionScheduler.
Rows written behind it are pushed to the scheduler directly; rows ahead of it wait in the store
until the controller loads them, which is what bounds memory (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import pykka

from scheduler import metrics
from scheduler.actors.base import PartitionActor
from scheduler.actors.context import PartitionContext
from scheduler.actors.throughput_controller import ThroughputController
from scheduler.actors.typed_proxy import ActorMemberMixin, proxy_method, typed_proxy
from scheduler.actors.unflushed import FLUSH_AT
from scheduler.codec import Command, Op
from scheduler.engine.messages import ScheduledTask
from scheduler.engine.reload_mark import MAX_STRAGGLERS, ReloadMark
from scheduler.engine.timers import TimerHandle
from scheduler.errors import BackendUnavailableError, is_refusal
from scheduler.model import ScheduleCursor, StoredTask, Task, TaskKey, TaskState, TaskStatus
from scheduler.stores.abc import TaskStore

if TYPE_CHECKING:
    from scheduler.actors.partition_executor import PartitionExecutorProxy


def window_end(until_ms: int) -> ScheduleCursor:
    """The cursor just past every key scheduled at or before `until_ms` (ordering ids are
    never empty)."""
    return (until_ms + 1, "", "")


MARK_AGE_MS = 30_000
"""The reload mark stays behind rows scheduled this long ago: more than the producers' grace
window (10 s), so that tasks enqueued for now land ahead of it instead of each changing it."""
BEFORE_ALL: ScheduleCursor = (-(2**63), "", "")
"""A cursor before every key."""


FLUSH_DEFERS = 4
"""Periods of `status_flush_ms` a due flush may wait for a busy mailbox (`flush_due`)."""

_RERUNNABLE = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})


def _scheduled(task: Task, status: TaskStatus | None, checked: int) -> ScheduledTask:
    """A task on its way to the scheduler, with what its (non-final) status says of its past."""
    if status is None:
        return ScheduledTask(task, checked=checked)
    running = status.updated_ms if status.state is TaskState.RUNNING else None
    return ScheduledTask(task, status.attempts, status.next_attempt_ms, checked, running)


def _live(row: StoredTask) -> bool:
    return row.status is None or not row.status.state.is_final


class TaskPersistence(PartitionActor):
    """Single writer of a partition's rows: schedule rows, statuses, operators' changes."""

    def __init__(self, ctx: PartitionContext, executor: PartitionExecutorProxy) -> None:
        super().__init__(ctx)
        self._executor = executor
        self._unflushed = ctx.unflushed
        self._unwritten = ctx.unwritten
        """Batches the store refused part-way: loads stop before their earliest row."""
        self.checkpoint: ScheduleCursor | None = None
        self.controller = ThroughputController(
            ctx,
            load=self.load,
            advance_mark=self.advance_mark,
            executor=executor,
            wake=self._tick_soon,
        )
        self.flush_timer: TimerHandle | None = None
        self._deferred = 0
        self.status_outage = ctx.store_probe("status rows", executor.store_outage.defer)
        """While the store refuses status rows, the flush timer is its probe."""

    def on_start(self) -> None:
        self._me = typed_proxy(self.actor_ref, TaskPersistenceProxy)

    def on_stop(self) -> None:
        self.controller.close()
        self.flush()  # in an outage the changes left are lost: the next owner reruns them

    # -- status rows (the seed's TaskCompletionTracker) ---------------------------------------

    def changed(self) -> None:
        """Status changes wait in the buffer: flush now if many do, else arm the timer."""
        if len(self._unflushed) >= FLUSH_AT and not self.status_outage.down:
            self.flush()
        elif self.flush_timer is None:
            self._arm_flush()

    def _arm_flush(self) -> None:
        me = self._me
        self.flush_timer = self.ctx.timers.call_later(
            self.ctx.settings.status_flush_ms / 1000, lambda: me.flush_due.defer()
        )

    def flush_due(self) -> None:
        """The flush timer fired. While other messages (persists, loads) wait in the mailbox,
        the flush waits one more period, up to `FLUSH_DEFERS`: under load statuses are written
        in fewer, larger batches instead of delaying each of those."""
        self.flush_timer = None
        busy = not self.actor_inbox.empty() and len(self._unflushed) < FLUSH_AT
        if busy and self._deferred < FLUSH_DEFERS and not self.status_outage.down:
            self._deferred += 1
            self._arm_flush()
            return
        self.flush()

    def flush(self) -> None:
        """Write every buffered status row now."""
        self._deferred = 0
        if self.flush_timer is not None:
            self.flush_timer.cancel()
            self.flush_timer = None
        try:
            self._unflushed.write(self.ctx.store, self.ctx.partition)
        except BackendUnavailableError as error:
            # The changes stay in the buffer, where look-ups see them; the next flush probes.
            delay = self.status_outage.refused(error)
            me = self._me
            self.flush_timer = self.ctx.timers.call_later(delay, lambda: me.flush.defer())
            return
        self.status_outage.answered()

    def discard(self, keys: Collection[TaskKey]) -> None:
        """Remove schedule rows of keys that are already final (a completed key enqueued again)."""
        self.ctx.store.delete_tasks(self.ctx.partition, keys)

    # -- the ThroughputController's calls ---------------------------------------------------

    def tick(self) -> None:
        """The ThroughputController's turn; the first one, once the whole tree is up, begins
        loading."""
        self.controller.tick()

    def _tick_soon(self) -> None:
        """Timer thread: the controller's next top-up is due."""
        self._me.tick.defer()

    def stop_loading(self) -> None:
        self.controller.stop_loading()

    # -- writes ---------------------------------------------------------------------------------

    def persist(self, commands: Sequence[Command], last_offset: int) -> int:
        """Apply a batch of log commands, read up to `last_offset`; returns once all are stored.
        A refusal (`is_refusal`: unavailable, or forbidden by the store's configuration) leaves
        the tree up; any other error fails it.

        Rows behind the checkpoint are pushed after the whole batch is applied, so a task
        cancelled by a later record of the same batch is not handed on."""
        to_write: dict[TaskKey, Task] = {}
        behind: dict[TaskKey, Task] = {}
        try:
            for command in commands:
                if command.op is Op.SCHEDULE:
                    to_write[command.task.key] = command.task  # a later write of a key wins
                else:
                    if to_write:
                        behind.update(self._write(list(to_write.values())))
                        to_write = {}
                    self._apply_admin(command)
            if to_write:
                behind.update(self._write(list(to_write.values())))
        except BaseException as error:
            # Some rows may be stored and earlier ones not: see `unwritten`.
            self._unwritten.refused(
                (c.task.key for c in commands if c.op is Op.SCHEDULE), last_offset
            )
            if not is_refusal(error):
                # A bug, as in the status flush: the tree is restarted. The worker holds the
                # batch (the error goes back with the future) and writes it to the new tree.
                self.ctx.report_failure(self.ctx.partition, self.ctx.generation, error)
            raise
        self._unwritten.stored(last_offset)
        if behind:
            self._push(list(behind.values()))
        metrics.PERSISTED.inc(len(commands))
        return len(commands)

    def _write(self, tasks: list[Task]) -> dict[TaskKey, Task]:
        """Write these rows; returns those behind the checkpoint, which must be pushed."""
        # The mark first: a row it does not cover would be skipped by the partition's next owner.
        self.ctx.mark.cover(task.key for task in tasks)
        store, partition = self.ctx.store, self.ctx.partition
        # The status changes waiting go with the rows, in one round trip.
        waiting = len(self._unflushed) and not self.status_outage.down
        statuses = self._unflushed.waiting() if waiting else []
        if statuses:
            with store.together():
                store.record_statuses(partition, statuses)
                store.write_tasks(partition, tasks)
            self._unflushed.written(statuses)
        else:
            store.write_tasks(partition, tasks)
        checkpoint = self.checkpoint
        if checkpoint is None:
            return {}
        return {task.key: task for task in tasks if task.key.cursor <= checkpoint}

    def _push(self, tasks: list[Task]) -> None:
        """Hand tasks behind the checkpoint to the scheduler, with their statuses read now (a
        finish between this read and the start is caught by the executor: `checked`)."""
        if self.ctx.held.total + len(tasks) > self.ctx.settings.max_in_flight_per_partition:
            # Over the in-flight bound: leave them in the store and move the checkpoint back
            # before them; rows read again are taken as overwrites.
            first_ms = min(task.key.scheduled_ms for task in tasks)
            assert self.checkpoint is not None
            self.checkpoint = min(self.checkpoint, window_end(first_ms - 1))
            metrics.SPILLED.inc(len(tasks))
            return
        checked = self._unflushed.version
        keys = [task.key for task in tasks]
        # Later tasks of these ordering ids wait for the push (see `await_keys`).
        self._executor.await_keys.defer(keys)
        try:
            statuses = self._unflushed.lookup(self.ctx.store, self.ctx.partition, keys)
        except BaseException:
            self._executor.schedule.defer([], keys)
            raise
        handed, final = [], []
        for task in tasks:
            status = statuses.get(task.key)
            if status is not None and status.state.is_final:
                final.append(task.key)  # a completed key never runs again
            else:
                handed.append(_scheduled(task, status, checked))
        self._hand(handed, keys)
        if final:
            self.ctx.store.delete_tasks(self.ctx.partition, final)

    def _hand(self, items: list[ScheduledTask], arrived: list[TaskKey] | None = None) -> None:
        """Send tasks to the PartitionExecutor, counted as on their way (`HeldCounts`)."""
        self.ctx.held.handed += len(items)
        self._executor.schedule.defer(items, arrived or ())

    def _apply_admin(self, command: Command) -> None:
        store, partition, key = self.ctx.store, self.ctx.partition, command.task.key
        if command.op is Op.CANCEL:
            # Through the buffer, so it replaces a RUNNING waiting there.
            self._unflushed.put(
                [TaskStatus(key, TaskState.CANCELLED, updated_ms=self.ctx.clock.now_ms())]
            )
            self.flush_now()
            metrics.CANCELLED.inc()
            self._executor.cancel.defer([key])
        elif command.op is Op.RETRY:
            self._run_again(command, {TaskState.FAILED})
        elif command.op is Op.RERUN:
            self._run_again(command, _RERUNNABLE)
        elif command.op is Op.DROP:
            if self._unflushed.peek([key]):
                self.flush_now()  # written later, its FAILED would come back after the drop
            status = store.fetch_statuses(partition, [key]).get(key)
            if status is not None and status.state is TaskState.FAILED:
                store.delete_statuses(partition, [key])

    def flush_now(self) -> None:
        """Write the buffered status rows as part of the batch being persisted (a refusal fails
        the persist)."""
        self._unflushed.write(self.ctx.store, self.ctx.partition)
        self.status_outage.answered()

    def _run_again(self, command: Command, states: Collection[TaskState]) -> None:
        """An operator's retry or rerun: the finished key runs once more, from its first attempt.
        The row is written before the final status is deleted, so a crash between the two is
        repaired by applying the (uncommitted) record again."""
        store, partition, key = self.ctx.store, self.ctx.partition, command.task.key
        if self._unflushed.peek([key]):
            # Its finish is not in the store yet: written later, it would delete the new row.
            self.flush_now()
        status = store.fetch_statuses(partition, [key]).get(key)
        if status is None or status.state not in states:
            found = status.state.value if status is not None else "not finished or not found"
            self.ctx.log.warning("%s of %s ignored: it is %s", command.op.value, key, found)
            return
        task = Task.from_key(key, command.task.data or status.data or {})
        self.ctx.mark.cover([key])
        store.write_tasks(partition, [task])
        store.delete_statuses(partition, [key])
        metrics.RUN_AGAIN.inc()
        if self.checkpoint is not None and key.cursor <= self.checkpoint:
            self._push([task])

    def load(self, until_ms: int, limit: int) -> tuple[int, bool]:
        """Read up to `limit` schedule rows past the checkpoint and due by `until_ms`; returns
        how many went to the PartitionScheduler, and whether every row up to `until_ms` is now
        loaded."""
        store, partition = self.ctx.store, self.ctx.partition
        if self.checkpoint is None:
            # A restarted tree's first load: write first what the tree before could not.
            self._unflushed.write(store, partition)
        unwritten = self._unwritten.earliest()
        if unwritten is not None:
            # Nothing past a refused batch's earliest row is loaded (see `unwritten`); nor a
            # first load, whose stragglers may lie past it.
            if self.checkpoint is None:
                return 0, True
            until_ms = min(until_ms, unwritten[0] - 1)
        checked = self._unflushed.version
        start, stragglers = self.checkpoint, list[StoredTask]()
        if start is None and (mark := self.ctx.mark.mark) is not None:
            # A new tree's first load reads from the reload mark, and its stragglers (without a
            # mark committed yet, from the first row).
            start, stragglers = mark.after, store.load_keys(partition, mark.stragglers)
        rows = store.load_tasks(partition, start, until_ms, limit)
        exhausted = len(rows) < limit
        if rows and not exhausted:
            self.checkpoint = rows[-1].task.key.cursor
        else:
            self.checkpoint = max(start or window_end(until_ms), window_end(until_ms))
        rows = stragglers + rows
        handed: list[ScheduledTask] = []
        leftovers = []
        unflushed = self._unflushed.peek(row.task.key for row in rows)
        for row in rows:
            status = unflushed.get(row.task.key, row.status)
            if status is not None and status.state.is_final:
                # The crash window between a final status and the row's deletion: finish the job.
                leftovers.append(row.task.key)
                continue
            handed.append(_scheduled(row.task, status, checked))
        if handed:
            self._hand(handed)
        if leftovers:  # refused, they stay: final rows are skipped by every load
            store.delete_tasks(partition, leftovers)
        return len(handed), exhausted

    def advance_mark(self) -> None:
        """Move the reload mark forward over what the store shows completed: up to rows
        scheduled `MARK_AGE_MS` ago, never past the checkpoint. Runs between this actor's
        writes, so no row is written while the store is read."""
        if self.checkpoint is None:
            return  # not loaded yet: the mark the tree started from stands
        mark = self.ctx.mark.mark or ReloadMark(BEFORE_ALL)
        upper_ms = min(self.ctx.clock.now_ms() - MARK_AGE_MS, self.checkpoint[0] - 1)
        if mark.after <= window_end(upper_ms):
            self.ctx.mark.replace(advanced_mark(self.ctx.store, self.ctx.partition, mark, upper_ms))


class TaskPersistenceProxy(ActorMemberMixin, pykka.ActorProxy[TaskPersistence]):
    """What the PartitionExecutor, the supervisors and the writer's own timers send it."""

    changed = proxy_method(TaskPersistence.changed)
    flush_due = proxy_method(TaskPersistence.flush_due)
    flush = proxy_method(TaskPersistence.flush)
    discard = proxy_method(TaskPersistence.discard)
    tick = proxy_method(TaskPersistence.tick)
    stop_loading = proxy_method(TaskPersistence.stop_loading)
    persist = proxy_method(TaskPersistence.persist)


def advanced_mark(store: TaskStore, partition: int, mark: ReloadMark, upper_ms: int) -> ReloadMark:
    """`mark` moved forward over the rows the store shows completed, up to `upper_ms`; live
    rows stepped over become stragglers, up to `MAX_STRAGGLERS`."""
    alive = [row.task.key for row in store.load_keys(partition, mark.stragglers) if _live(row)]
    room = MAX_STRAGGLERS - len(alive)
    after, found = mark.after, list[TaskKey]()
    while room > 0:
        wanted = room + 1 - len(found)
        rows = store.load_tasks(partition, after, upper_ms, wanted)
        found += [row.task.key for row in rows if _live(row)]
        if len(found) > room:  # more live rows than fit: stop at the last that fits
            after = found[room - 1].cursor
            found = found[:room]
            break
        if len(rows) < wanted:  # none left up to upper_ms
            after = window_end(upper_ms)
            break
        after = rows[-1].task.key.cursor
    return ReloadMark(after, tuple(sorted(alive + found)))
