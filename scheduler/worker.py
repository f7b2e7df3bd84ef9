"""The worker: one member of the consumer group, running the engine for its partitions.

One thread polls the log. Rebalance callbacks run inside `poll`, so a revocation can block
until the partition's running tasks are done or cancelled. Each batch goes to the
TopicSupervisor; its offsets are committed only once the partitions' TaskPersistence actors
have stored it. A partition whose batch the store refuses is paused, holding the batch, which
it writes again as the store's probe (`engine.outage`).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

import pykka

from scheduler import metrics
from scheduler.actors.base import ASK_TIMEOUT_S
from scheduler.actors.partition_executor import PARTITION_LOST
from scheduler.actors.partition_supervisor import describe_keys
from scheduler.actors.topic_supervisor import (
    PartitionFailure,
    TopicSupervisor,
    TopicSupervisorProxy,
)
from scheduler.actors.typed_proxy import typed_proxy
from scheduler.codec import MalformedRecordError, decode
from scheduler.engine.clock import SYSTEM_CLOCK, Clock
from scheduler.engine.deadline import StopDeadline
from scheduler.engine.executor_service import TaskExecutorService
from scheduler.engine.lease import ALWAYS_HELD, Lease, lease_term_s
from scheduler.engine.outage import Backoff, HeldBatch, PartitionOutages
from scheduler.engine.reload_mark import MarkHolder, ReloadMark
from scheduler.engine.settings import EngineSettings
from scheduler.engine.timers import TimerService
from scheduler.errors import SchedulerError, StoreReplacedError, is_refusal
from scheduler.executors.abc import Executor
from scheduler.health import DEFAULT_STALL_S, Health, State, stall_problem
from scheduler.logs.abc import LogConsumer, LogRecord, TaskLog
from scheduler.stores.abc import MalformedRecord, TaskStore
from scheduler.topic_guard import TopicGuard

logger = logging.getLogger(__name__)

#: How long one persist may take before the worker treats the partition as stuck.
PERSIST_TIMEOUT_S = 120.0
PERSIST_WAIT_S = 2.0
"""How long the poll loop waits for a batch's write before it goes on polling, the partition
paused until the write answers (`engine.outage`): the loop is never silent for longer."""
T = TypeVar("T")
TOPIC_ASK_TIMEOUT_S = ASK_TIMEOUT_S
"""The longest the worker waits for the TopicSupervisor's answer (a revocation gets its deadline
on top): past it an actor is stuck, and the worker stops rather than hang."""
REVOKE_SAY_AFTER_S = 15.0
"""How long past its deadline a revocation may take before the worker says what it waits on."""
MARK_COMMIT_INTERVAL_S = 5.0
"""How often reload marks that moved are committed on partitions without new records."""


class Worker:
    """Runs the engine for the partitions the group assigns to this process."""

    def __init__(
        self,
        *,
        log: TaskLog,
        store: TaskStore,
        executor: Executor,
        settings: EngineSettings = EngineSettings(),
        group_id: str = "scheduler-workers",
        client_id: str | None = None,
        rng: random.Random | None = None,
        clock: Clock = SYSTEM_CLOCK,
        lease: Lease | None = None,
        poll_clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.log = log
        self.clock = clock
        self.lease: Lease = lease or ALWAYS_HELD
        """See `engine.lease`; unless given, made at `start` from the consumer's session timing."""
        self._lease_given = lease is not None
        self.store = store
        self.executor = executor
        self.settings = settings
        self.group_id = group_id
        self.client_id = client_id or f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self.rng = rng
        self._stop = threading.Event()
        self._deadline: StopDeadline | None = None
        """Set with `_stop`: how long running attempts may still finish."""
        self._trees_down = False
        """Set once `_shutdown` stopped every tree, before the consumer's close revokes."""
        self._reports_fatal = False
        """Set by `run_until_signalled`, which raises the fatal error: the loop then does not
        log it too."""
        self._stopped = threading.Event()
        self._started = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: LogConsumer | None = None
        self._topic: TopicSupervisorProxy | None = None
        self._timers: TimerService | None = None
        self._service: TaskExecutorService | None = None
        # Per partition, the offset up to which records are stored (the reload mark's commits
        # go there), and those not committed yet (a failed commit is retried with the next).
        self._persisted: dict[int, int] = {}
        self._to_commit: dict[int, int] = {}
        self._outages = PartitionOutages(poll_clock, Backoff(settings.restart_backoff_s))
        """Partitions whose store refused their batch (`engine.outage`). Their probes wait on
        `poll_clock`, real time even when a test steps `clock`."""
        self._restarting: set[int] = set()  # the TopicSupervisor's own set
        # Per partition, its reload mark and the version of it last committed.
        self._marks: dict[int, MarkHolder] = {}
        self._marks_committed: dict[int, int] = {}
        self._marks_due = 0.0
        self._guard = TopicGuard(log)
        self._replaced_store: StoreReplacedError | None = None
        self.fatal_error: BaseException | None = None
        self._last_turn = time.monotonic()
        """When the poll loop last turned (read by `health`)."""

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Join the group and start working on a background thread."""
        # The consumer first: a refusal must fail before any thread of ours exists (they would
        # keep the process alive) and before a caller says the worker started.
        consumer = self.log.consumer(self.group_id, client_id=self.client_id)
        try:
            consumer.subscribe(self)
        except BaseException as error:
            consumer.close()
            self.fatal_error = error
            self._stopped.set()
            raise
        self._consumer = consumer
        if not self._lease_given:
            self.lease = _lease_for(consumer, self.clock)
        self._guard.start()
        self._timers = TimerService(clock=self.clock)
        self._service = TaskExecutorService(self.settings.pool_size)
        topic_ref = TopicSupervisor.start(
            store=self.store,
            executor=self.executor,
            executor_service=self._service,
            timers=self._timers,
            settings=self.settings,
            rng=self.rng,
            restarting=self._restarting,
            worker_id=self.client_id,
            lease=self.lease,
        )
        self._topic = typed_proxy(topic_ref, TopicSupervisorProxy)
        logger.info("worker %s started in group %s", self.client_id, self.group_id)
        self._thread = threading.Thread(target=self._run, name="scheduler-poll", daemon=True)
        self._thread.start()
        metrics.CONSUMER_LAG.watch(self.consumer_lag)

    def stop(self, timeout: float | None = None, *, now: bool = False) -> None:
        """Stop gracefully: no new tasks start, running ones get the shutdown deadline, then
        are cancelled and go back to pending for the next owner. `now=True` (also after a
        graceful stop began) cancels them at once. Waits up to `timeout` s for the stop."""
        deadline = self._request_stop()
        if now:
            deadline.end_now()
        if self._thread is not None:
            self._thread.join(timeout)

    def _request_stop(self) -> StopDeadline:
        if self._deadline is None:  # the deadline first: the poll loop reads it once stopped
            self._deadline = StopDeadline(self.settings.shutdown_deadline_s)
        self._stop.set()
        return self._deadline

    def run_until_signalled(self, on_started: Callable[[], object] | None = None) -> None:
        """Start, then block until SIGTERM or SIGINT, then stop gracefully. `on_started` runs
        once the worker has started (a CLI's banner: not printed for a worker that fails to)."""

        received: list[int] = []

        def on_signal(signum: int, frame: FrameType | None) -> None:
            # Only note it: the main thread may hold the lock that set() or logging would take.
            received.append(signum)

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        self._reports_fatal = True
        handled = 0
        try:
            self.start()
            if on_started is not None:
                on_started()
            while not self._stopped.wait(0.1):
                if len(received) > handled:
                    self._on_stop_signal(received[handled], first=handled == 0)
                    handled = len(received)
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.fatal_error is not None:
            raise self.fatal_error

    def _on_stop_signal(self, signum: int, *, first: bool) -> None:
        """Say what the stop waits for and how to cut it short; a second signal cuts it."""
        name = signal.Signals(signum).name
        if not first:
            if self._deadline is not None and not self._deadline.ended_early:
                logger.warning("received %s again: stopping now, cancelling running tasks", name)
                self.stop(0, now=True)
            return
        try:  # asked before the stop, which keeps the TopicSupervisor busy until it is done
            running = self.topic.running_keys().get(timeout=2)
        except Exception:  # a busy or failing tree: say less rather than wait
            running = None
        deadline = self._request_stop()
        again = "Ctrl-C" if signum == signal.SIGINT else name
        if running is None:
            waits = f"the running tasks to finish (up to {deadline.seconds:g} s)"
        elif not running:
            logger.info("received %s, stopping: no task is running", name)
            return
        else:
            waits = (
                f"up to {deadline.seconds:g} s for {len(running)} running task(s) to finish: "
                f"{describe_keys(running)}"
            )
        logger.warning(
            "received %s, stopping: no new task starts; waiting %s; %s again to stop now "
            "(running tasks are then cancelled, and run again on their partition's next owner)",
            name,
            waits,
            again,
        )

    @property
    def topic(self) -> TopicSupervisorProxy:
        assert self._topic is not None, "worker not started"
        return self._topic

    @property
    def executor_service(self) -> TaskExecutorService:
        assert self._service is not None, "worker not started"
        return self._service

    def failures(self) -> list[PartitionFailure]:
        """The first partition failures since start, up to `KEPT_FAILURES`."""
        return _answer(self.topic.failures_so_far(), TOPIC_ASK_TIMEOUT_S, "failures_so_far")

    def owned_partitions(self) -> list[int]:
        return _answer(self.topic.owned(), TOPIC_ASK_TIMEOUT_S, "owned")

    def consumer_lag(self) -> dict[int, int]:
        """Per owned partition, the records past the group's committed offset (not yet stored);
        asks the log; any thread."""
        owned = self._consumer.assignment() if self._consumer is not None else set()
        if not owned:
            return {}
        return {lag.partition: lag.lag for lag in self.log.describe_group(self.group_id, owned)}

    def health(self, stall_s: float = DEFAULT_STALL_S) -> Health:
        """What the worker's probes answer (`scheduler.health`); any thread."""
        silent_s = time.monotonic() - self._last_turn
        consumer, problem = self._consumer, None
        state: State
        if self._stopped.is_set():
            state = "stopped" if self.fatal_error is None else "failed"
            if self.fatal_error is not None:
                problem = f"stopped on an error: {self.fatal_error}"
        elif silent_s > stall_s:
            state, problem = "stalled", stall_problem(silent_s, stall_s)
        elif self._stop.is_set():
            state = "stopping"
        elif self._thread is None or consumer is None or not consumer.has_joined():
            state = "starting"
        else:
            state = "running"
        if problem is None and state != "stopped":
            # A refused login, a store with no node up: said, though the probes still pass.
            found = [self.store.problem(), consumer.problem() if consumer is not None else None]
            problem = "; ".join(said for said in found if said) or None
        return Health(
            state=state,
            last_poll_s=round(silent_s, 3),
            partitions=sorted(consumer.assignment()) if consumer is not None else [],
            persist_failing=self._outages.failures(),
            restarting=sorted(self._restarting.copy()),
            problem=problem,
        )

    def wait_until_assigned(self, timeout: float) -> bool:
        """True once the group has assigned this worker its partitions, False after `timeout`
        seconds; if the worker stops first, raise the error that stopped it."""
        deadline = time.monotonic() + timeout
        while not self._started.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if self._stopped.is_set():
                if self.fatal_error is not None:
                    raise self.fatal_error
                return self._started.is_set()
            if time.monotonic() >= deadline:
                return False
        return True

    # -- rebalance listener (called on the poll thread, inside poll) ----------------------------

    def on_assigned(self, partitions: list[int]) -> None:
        logger.info("assigned partitions %s", partitions)
        assert self._consumer is not None
        self._forget(partitions)
        # Partitions the topic did not have at start raise (out of `poll`: the worker stops).
        self._guard.check_assigned(self._consumer, partitions)
        committed = self._consumer.committed_with_metadata(partitions)
        marks = {p: ReloadMark.decode(metadata) for p, (_, metadata) in committed.items()}
        holders = _answer(self.topic.assign(partitions, marks), TOPIC_ASK_TIMEOUT_S, "assign")
        self._marks.update(holders)
        for partition, (offset, _) in committed.items():
            if offset is not None:  # where the mark's commits go
                self._persisted[partition] = offset
        self._started.set()

    def on_revoked(self, partitions: list[int]) -> None:
        assert self._consumer is not None
        if self._trees_down:  # the worker's own stop, whose trees are down already
            logger.info("left the group; partitions %s are free for other workers", partitions)
        else:
            logger.info(
                "revoked partitions %s; letting their running tasks finish (up to %g s)",
                partitions,
                self.settings.shutdown_deadline_s,
            )
        self._commit(self._consumer, only=partitions)  # the last chance to commit them
        self._forget(partitions)
        if not self._trees_down:
            revoked = self._deadline or self.settings.shutdown_deadline_s
            self._revoke(partitions, revoked, "partition revoked")

    def on_lost(self, partitions: list[int]) -> None:
        logger.warning("lost partitions %s; cancelling their running tasks", partitions)
        began = time.monotonic()
        self._forget(partitions)
        self._revoke(partitions, 0.0, PARTITION_LOST)
        logger.info(
            "lost partitions %s are down here after %.1f s; waiting for the group to assign "
            "partitions again (the consumer rejoins by itself)",
            partitions,
            time.monotonic() - began,
        )

    def _revoke(self, partitions: list[int], deadline: StopDeadline | float, reason: str) -> None:
        """Have the TopicSupervisor take these partitions' trees down; wait up to the deadline
        and `TOPIC_ASK_TIMEOUT_S` more, saying so past REVOKE_SAY_AFTER_S."""
        grace = deadline.seconds if isinstance(deadline, StopDeadline) else deadline
        future = self.topic.revoke(partitions, deadline, reason)
        first = grace + REVOKE_SAY_AFTER_S
        try:
            future.get(timeout=first)
            return
        except pykka.Timeout:
            pass
        logger.warning(
            "%s: the actor trees of partitions %s are not down %g s past their deadline of "
            "%g s; the poll loop waits for them up to %g s more (see the lines of those "
            "partitions for the actor that does not answer)",
            reason,
            partitions,
            REVOKE_SAY_AFTER_S,
            grace,
            TOPIC_ASK_TIMEOUT_S - REVOKE_SAY_AFTER_S,
        )
        _answer(future, TOPIC_ASK_TIMEOUT_S - REVOKE_SAY_AFTER_S, "revoke")

    def _forget(self, partitions: list[int]) -> None:
        self._guard.forget(partitions)
        paused = [p for p in partitions if p in self._outages]
        if paused and self._consumer is not None:
            # Else it could come back paused, with no outage of ours to resume it.
            try:
                self._consumer.resume(paused)
            except Exception as error:  # leaving anyway: a log that refuses says why elsewhere
                logger.debug("could not resume partitions %s as they left: %s", paused, error)
        self._outages.forget(partitions)
        for partition in partitions:
            self._persisted.pop(partition, None)
            self._to_commit.pop(partition, None)
            self._marks.pop(partition, None)
            self._marks_committed.pop(partition, None)

    # -- the poll loop ------------------------------------------------------------------------

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        try:
            while not self._stop.is_set():
                self._last_turn = time.monotonic()
                self._probe_outages(consumer)
                records = consumer.poll(self.settings.poll_max_records, timeout=0.2)
                self.lease.confirm()
                if records:
                    self._process(consumer, records)
                self._commit_marks(consumer)
                self._guard.check_topic()
                if (replaced := self._store_replaced()) is not None:
                    # `rm -r` of the data dir takes the log too: that error says more.
                    self._guard.check_topic(now_and_certain=True)
                    raise replaced
        except SchedulerError as error:
            # Ours, with a message that says what to do: no traceback, and said once.
            if not self._reports_fatal:
                logger.error("worker stopped: %s", error)
            self.fatal_error = error
        except BaseException as error:
            logger.exception("worker poll loop failed")
            self.fatal_error = error
        finally:
            self._shutdown(consumer)

    def _process(self, consumer: LogConsumer, records: list[LogRecord]) -> None:
        batches: dict[int, HeldBatch] = {}
        first_offsets: dict[int, int] = {}
        for record in records:
            batch = batches.get(record.partition)
            if batch is None:
                batch = batches[record.partition] = HeldBatch([], [], record.offset + 1)
                first_offsets[record.partition] = record.offset
            batch.next_offset = record.offset + 1
            try:
                command = decode(record.value)
            except MalformedRecordError as error:
                batch.malformed.append(self._set_aside(record, error))
                continue
            self._guard.check_record(record, command)  # may raise: nothing of the batch stored
            batch.commands.append(command)
        self._guard.check_read(
            first_offsets, {p: batch.next_offset - 1 for p, batch in batches.items()}
        )
        running: dict[int, HeldBatch] = {}
        for partition, batch in batches.items():
            if partition in self._outages:  # read before its pause took hold: held behind
                self._outages.hold_more(partition, batch)
                consumer.pause([partition])
            else:
                running[partition] = batch
        stored: dict[int, int] = {}
        until = time.monotonic() + PERSIST_WAIT_S
        for partition, write in self._store(running).items():
            batch = running[partition]
            if isinstance(write, BaseException):
                self._outages.enter(partition, batch, write)
            elif write is None:
                stored[partition] = batch.next_offset
                continue
            elif (failure := _answered(write, until - time.monotonic())) is _UNDER_WAY:
                self._outages.writing(partition, batch, write)  # the partition waits, paused
            elif failure is None:
                stored[partition] = batch.next_offset
                continue
            else:
                self._outages.enter(partition, batch, failure, bug=_is_bug(failure))
            consumer.pause([partition])
        self._stored(consumer, stored)

    def _probe_outages(self, consumer: LogConsumer) -> None:
        """Send the probes that are due (the held batches again), then look at the writes under
        way without waiting: commit and resume the partitions stored."""
        stored: dict[int, int] = {}
        for partition, write in self._store(dict(self._outages.due())).items():
            if write is None:  # nothing left for its tree to write
                stored[partition] = self._outages.stored(partition)
            elif isinstance(write, BaseException):
                self._outages.failed(partition, write)
            else:
                self._outages.sent(partition, write)
        for partition, write, age in self._outages.writes():
            error = _answered(write, 0.0)
            if error is _UNDER_WAY and age >= PERSIST_TIMEOUT_S:
                error = pykka.Timeout(f"the write did not answer within {PERSIST_TIMEOUT_S:g} s")
                self._outages.failed(partition, error)
            elif error is _UNDER_WAY:
                continue  # still under way: looked at again on the next turn
            elif error is None:
                stored[partition] = self._outages.stored(partition)
            else:
                self._outages.failed(partition, error, bug=_is_bug(error))
        if stored:
            consumer.resume([p for p in stored if p not in self._outages])
            self._stored(consumer, stored)

    def _store(
        self, batches: dict[int, HeldBatch]
    ) -> dict[int, pykka.Future[int] | BaseException | None]:
        """Have each partition's batch stored (malformed records here, commands by its tree);
        returns per partition the future of its write, the error that refused it, or None if
        it is stored already."""
        if not batches:
            return {}
        refused: dict[int, BaseException] = self._keep_malformed(
            [record for batch in batches.values() for record in batch.malformed]
        )
        commands = {
            p: list(batch.commands)
            for p, batch in batches.items()
            if p not in refused and batch.commands
        }
        last_offsets = {p: batches[p].next_offset - 1 for p in commands}
        persisting = self.topic.persist(commands, last_offsets)
        futures = _answer(persisting, TOPIC_ASK_TIMEOUT_S, "persist")
        writes: dict[int, pykka.Future[int] | BaseException | None] = dict.fromkeys(batches)
        writes.update(refused)
        for partition in commands:
            writes[partition] = futures.get(partition) or pykka.ActorDeadError(
                f"partition {partition} has no actor tree: it is restarting after a failure (see "
                "the line that said why)"
            )
        return writes

    def _stored(self, consumer: LogConsumer, offsets: dict[int, int]) -> None:
        """These partitions' records up to `offsets` are in the store: commit them."""
        self._persisted.update(offsets)
        self._to_commit.update(offsets)
        self._commit(consumer)

    def _commit(self, consumer: LogConsumer, only: list[int] | None = None) -> None:
        """Commit stored offsets; a failure is logged and retried with the next batch."""
        offsets = {p: o for p, o in self._to_commit.items() if only is None or p in only}
        if not offsets or self._store_replaced() is not None:
            # Left uncommitted, they are read again into the next worker's new store.
            return
        marks = {p: self._marks[p].encoded() for p in offsets if p in self._marks}
        metadata = {p: text for p, (_, text) in marks.items()}
        try:
            consumer.commit(offsets, wait=only is not None, metadata=metadata)
        except SchedulerError as error:
            logger.warning(
                "could not commit offsets %s (%s); they are stored, the commit is retried with "
                "the next batch and at worst the records are read again",
                offsets,
                error,
            )
            return
        for partition, offset in offsets.items():
            if self._to_commit.get(partition) == offset:
                del self._to_commit[partition]
        self._marks_committed.update((p, version) for p, (version, _) in marks.items())

    def _store_replaced(self) -> StoreReplacedError | None:
        """Why the store must not be written any more (see `TaskStore.check_replaced`)."""
        if self._replaced_store is None:
            try:
                self.store.check_replaced()
            except StoreReplacedError as error:
                self._replaced_store = error
        return self._replaced_store

    def _commit_marks(self, consumer: LogConsumer) -> None:
        """Every few seconds, commit the reload marks that moved on partitions with no new
        records (the offset stays; only its metadata changes)."""
        now = time.monotonic()
        if now < self._marks_due:
            return
        self._marks_due = now + MARK_COMMIT_INTERVAL_S
        # The same few seconds serve the log's shared clients, whose lines would wait otherwise.
        self.log.serve()
        for partition, holder in self._marks.items():
            if (
                holder.version != self._marks_committed.get(partition)
                and partition in self._persisted
                and partition not in self._outages
            ):
                self._to_commit.setdefault(partition, self._persisted[partition])
        self._commit(consumer)

    def _set_aside(self, record: LogRecord, error: Exception) -> MalformedRecord:
        """A record nobody can run: log it and count it; the caller keeps it in the store."""
        metrics.MALFORMED.inc()
        logger.error(
            "malformed record at partition %d offset %d set aside: %s (key=%r, value=%r); "
            "see `scheduler malformed list`",
            record.partition,
            record.offset,
            error,
            record.key,
            (record.value or b"")[:500],
            extra={"partition": record.partition, "offset": record.offset},
        )
        return MalformedRecord.of(
            record.partition,
            record.offset,
            reason=str(error),
            key=record.key,
            value=record.value,
            timestamp_ms=record.timestamp_ms,
            seen_ms=self.clock.now_ms(),
        )

    def _keep_malformed(self, records: list[MalformedRecord]) -> dict[int, BaseException]:
        """Store the batch's malformed records; returns the partitions the store refused."""
        if not records:
            return {}
        try:
            self.store.set_aside(records)
        except Exception as error:
            return {record.partition: error for record in records}
        return {}

    def _shutdown(self, consumer: LogConsumer) -> None:
        metrics.CONSUMER_LAG.unwatch(self.consumer_lag)  # before the consumer closes
        deadline = self._request_stop()
        try:
            owned = _answer(self.topic.owned(), TOPIC_ASK_TIMEOUT_S, "owned")
            self._revoke(owned, deadline, "worker stopping")
            self._trees_down = True
            consumer.close()
        except Exception:
            logger.exception("error while stopping the worker")
        finally:
            # Past its deadline, 30 s and `TOPIC_ASK_TIMEOUT_S`, the TopicSupervisor is stuck.
            timeout = deadline.seconds + 30 + TOPIC_ASK_TIMEOUT_S
            try:
                self.topic.actor_ref.stop(timeout=timeout)
            except pykka.Timeout:
                logger.error(
                    "the worker's TopicSupervisor did not stop within %g s: one of its actors "
                    "is stuck (a store call that never returns?); the worker stops without it",
                    timeout,
                )
            self.executor_service.shutdown(wait=False)
            assert self._timers is not None  # all three made by `start`, before this thread
            self._timers.stop()
            self._guard.close()
            self._stopped.set()
            logger.info("worker %s stopped", self.client_id)


def _answer(future: pykka.Future[T], timeout: float, question: str) -> T:
    """The answer of an ask to the TopicSupervisor, waited for `timeout` s at most."""
    try:
        return future.get(timeout=timeout)
    except pykka.Timeout:
        raise SchedulerError(
            f"the worker's TopicSupervisor did not answer {question!r} within {timeout:g} s: one "
            "of its actors is stuck (a store call that never returns?); the worker stops so that "
            "its partitions go to another; a thread dump (py-spy dump) shows where it waits"
        ) from None


_UNDER_WAY = pykka.Timeout("the write is still under way")
"""What `_answered` says of a write that has not answered yet."""


def _answered(write: pykka.Future[int], timeout: float) -> BaseException | None:
    """The write's answer within `timeout` s: None once it is stored, the error that failed
    it, or `_UNDER_WAY` while it is still under way."""
    try:
        write.get(timeout=max(0.0, timeout))
    except pykka.Timeout:
        return _UNDER_WAY
    except Exception as error:
        return error
    return None


def _is_bug(error: BaseException) -> bool:
    """Whether a tree's failed write is a bug (the tree is restarted) rather than a refusal: the
    store unavailable or refusing (`is_refusal`), a write that timed out, or a tree that is gone
    (restarting already)."""
    return not (is_refusal(error) or isinstance(error, pykka.Timeout | pykka.ActorDeadError))


def _lease_for(consumer: LogConsumer, clock: Clock) -> Lease:
    """A lease that lapses two heartbeats before the session would, and settles for two."""
    timing = consumer.session_timing()
    if timing is None:
        return ALWAYS_HELD
    session_s, heartbeat_s = timing
    return Lease(term_s=lease_term_s(session_s, heartbeat_s), settle_s=2 * heartbeat_s, clock=clock)
