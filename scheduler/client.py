"""The producer side: `schedule_task` and the admin operations that travel on the log."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from datetime import timedelta
from time import time_ns as _time_ns
from typing import TYPE_CHECKING, Any

from scheduler import bulk, codec, metrics, speedups
from scheduler.bulk import BulkOperation, BulkResult, TaskFilter
from scheduler.codec import Op, compact, encode
from scheduler.engine.clock import now_ms
from scheduler.errors import ConfigurationError, TaskInPastError
from scheduler.logs.abc import LogProducer, TaskLog
from scheduler.model import Task, TaskKey, encode_data

if TYPE_CHECKING:
    from scheduler.stores.abc import TaskStore

DEFAULT_MAX_DATA_BYTES = 256 * 1024
_C_LIMIT = 2**62
"""The largest setting the C path holds (a C long long); larger ones say the same to it."""


class SchedulerClient:
    """Schedules tasks by writing them to the task log. Thread-safe."""

    def __init__(
        self,
        *,
        log: TaskLog,
        grace_window_s: float = 10.0,
        max_data_bytes: int = DEFAULT_MAX_DATA_BYTES,
        validate: Callable[[Task], None] | None = None,
        owns_log: bool = False,
        store: TaskStore | None = None,
    ) -> None:
        self.log = log
        self._owns_log = owns_log
        """Whether `close` closes the log too (`scheduler.connect` built it for this client),
        and the store if it was given."""
        self.store = store
        """The deployment's task store, opened, for the bulk operations (`retry_tasks`,
        `drop_tasks`, `rerun_tasks`) that find their tasks there; None for a producer."""
        self._producer: LogProducer = log.producer()
        send_counted = self._producer.sender(on_durable=_count_one)
        self._send_counted = send_counted
        self._encode = codec.schedule_encoder()
        self._c_path: Any = None
        """`schedule_task` in C where it is built (`scheduler.speedups`); it hands every task it
        does not take to `_schedule_in_python`."""
        if speedups.enabled():
            assert speedups.native is not None
            self._c_path = speedups.native.TaskScheduler(
                send=send_counted,
                slow=self._schedule_in_python,
                failed=_failed,
                dumps=codec.DUMPS,
                dumps_option=codec.DUMPS_OPTIONS,
                validate=validate,
                grace_ns=0,  # both set just below, as any later change sets them
                max_data_bytes=0,
            )
            if type(self).schedule_task is SchedulerClient.schedule_task:
                # Calls go straight to C: the Python frame of `schedule_task` alone cost a
                # seventh of the C path's time (docs/benchmark-history.md, thirty-fifth session).
                self.schedule_task = self._c_path  # type: ignore[method-assign]
        self.grace_window_ms = int(grace_window_s * 1000)
        self.max_data_bytes = max_data_bytes
        self.validate = validate

    def schedule_task(self, task: Task) -> Future[int]:
        """Have `task` run at its scheduled time.

        Returns a future that resolves, to the task's partition, once the task is durably
        accepted (Kafka: acknowledged by all in-sync replicas). Invalid tasks are refused at once
        with a failed future carrying a `TaskRejected` subclass; nothing is written for them. A
        task whose key is already pending replaces it; a key that already reached a final state
        never runs again.
        """
        return self._schedule_in_python(task)

    def _schedule_in_python(self, task: Task) -> Future[int]:
        """`schedule_task` in Python: all of it without the C path, and with it every task that
        path hands over (a `validate` hook, a late task, unusual data, any error)."""
        try:
            key = task.key
            # The grace window in nanoseconds straight off the clock: `now_ms()` would be a
            # Python call per task. `_check` says what is wrong, off the common path.
            if (
                key.scheduled_ms * 1_000_000 < _time_ns() - self._grace_window_ns
                or self.validate is not None
            ):
                self._check(task)
            value = self._encode(key, task.data, self.max_data_bytes)
            # The ordering id as it is: the log encodes a str key itself, in C.
            return self._send_counted(key.ordering_id, value)
        except Exception as error:  # reported through the future, as promised
            return _failed(error)

    def _check(self, task: Task) -> None:
        """Raise the `TaskRejected` error that refuses `task`, if any (its data aside)."""
        _check_time_and_job(task, self.grace_window_ms, self.validate)

    # The settings `schedule_task` reads, kept in the C path too when there is one.

    @property
    def grace_window_ms(self) -> int:
        """How far in the past a task may be scheduled (it then runs at once); older is refused."""
        return self._grace_window_ns // 1_000_000

    @grace_window_ms.setter
    def grace_window_ms(self, value: int) -> None:
        self._grace_window_ns = int(value) * 1_000_000
        # A C long long; a window of centuries only sends the oldest tasks to the Python check.
        self._set_in_c_path("grace_ns", min(self._grace_window_ns, _C_LIMIT))

    @property
    def max_data_bytes(self) -> int:
        """The largest task data accepted, in bytes of its JSON."""
        return self._max_data_bytes

    @max_data_bytes.setter
    def max_data_bytes(self, value: int) -> None:
        self._max_data_bytes = int(value)
        self._set_in_c_path("max_data_bytes", min(self._max_data_bytes, _C_LIMIT))

    @property
    def validate(self) -> Callable[[Task], None] | None:
        """Called with every task before it is sent; raise a `TaskRejected` to refuse it."""
        return self._validate

    @validate.setter
    def validate(self, value: Callable[[Task], None] | None) -> None:
        self._validate = value
        self._set_in_c_path("validate", value)

    def _set_in_c_path(self, name: str, value: object) -> None:
        if self._c_path is not None:
            setattr(self._c_path, name, value)

    def _records(self, tasks: Iterable[Task]) -> list[tuple[str, bytes]]:
        """The records that schedule `tasks`, or the `TaskRejected` error that refuses one.

        One clock reading for the whole call, as `schedule_task` reads it once per task (a task
        late by it is judged again by `_check`, on the clock of that moment). Exact-size copies
        (see `codec.compact`): a bulk call holds all of its records at once."""
        oldest_ms = now_ms() - self.grace_window_ms
        validate, max_data_bytes, encode_schedule = self.validate, self.max_data_bytes, self._encode
        records: list[tuple[str, bytes]] = []
        append = records.append
        for task in tasks:
            key = task.key
            if key.scheduled_ms < oldest_ms or validate is not None:
                self._check(task)
            append((key.ordering_id, compact(encode_schedule(key, task.data, max_data_bytes))))
        return records

    def schedule_tasks(self, tasks: Iterable[Task]) -> Future[int]:
        """Schedule many tasks at once, for bulk producers (a backfill, a migration).

        Every task is checked first; if any is invalid, nothing is written and the returned future
        fails with its error. Otherwise one future resolves, to the number of tasks, once all of
        them are durably accepted; it fails with the first delivery error (some tasks may have
        been written then: enqueuing them again is safe, since a key overwrites itself).
        """
        try:
            future = self._producer.send_many(self._records(tasks))
        except Exception as error:
            return _failed(error)
        future.add_done_callback(_count_enqueued)
        return future

    def cancel_task(self, key: TaskKey) -> Future[int]:
        """Cancel a pending task (it becomes CANCELLED); a running attempt is cancelled too."""
        return self._send(Op.CANCEL, key)

    def retry_task(self, key: TaskKey) -> Future[int]:
        """Run a FAILED task again from its first attempt, with the data it failed with."""
        return self._send(Op.RETRY, key)

    def drop_task(self, key: TaskKey) -> Future[int]:
        """Forget a FAILED task."""
        return self._send(Op.DROP, key)

    def rerun_task(self, key: TaskKey, data: Mapping[str, Any] | None = None) -> Future[int]:
        """Run a finished task (SUCCEEDED, FAILED or CANCELLED) once more, from its first
        attempt and in its place in its ordering id's key order: with `data` if given and not
        empty, else with the data its status row kept. A key that is not finished when the
        worker owning it reads the request is left alone (the worker logs why)."""
        try:
            data_json = encode_data(data or {}, max_bytes=self.max_data_bytes)
        except Exception as error:
            return _failed(error)
        return self._send(Op.RERUN, key, data_json)

    def retry_tasks(self, where: TaskFilter, *, dry_run: bool = False) -> BulkResult:
        """`retry_task` for every FAILED task `where` selects; with `dry_run`, send nothing and
        say what would be retried. Needs the client's `store` (`scheduler.connect(admin=True)`)."""
        return self._bulk(BulkOperation.RETRY, where, dry_run)

    def drop_tasks(self, where: TaskFilter, *, dry_run: bool = False) -> BulkResult:
        """`drop_task` for every FAILED task `where` selects (see `retry_tasks`)."""
        return self._bulk(BulkOperation.DROP, where, dry_run)

    def rerun_tasks(
        self,
        where: TaskFilter,
        *,
        data: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> BulkResult:
        """`rerun_task` for every finished task `where` selects, each with `data` if given,
        else with the data its status row kept (see `retry_tasks`)."""
        if data:
            encode_data(data, max_bytes=self.max_data_bytes)  # refused before anything is sent
            return self._bulk(
                BulkOperation.RERUN, where, dry_run, lambda key: self.rerun_task(key, data)
            )
        return self._bulk(BulkOperation.RERUN, where, dry_run)

    def _bulk(
        self,
        operation: BulkOperation,
        where: TaskFilter,
        dry_run: bool,
        send: Callable[[TaskKey], Future[int]] | None = None,
    ) -> BulkResult:
        if self.store is None:
            raise ConfigurationError(
                f"{operation.value}_tasks finds its tasks in the task store, and this client has "
                "none: make it with scheduler.connect(admin=True), or give "
                "SchedulerClient(store=...) an opened store"
            )
        if send is None:
            send = getattr(self, f"{operation.value}_task")
        return bulk.apply(
            self.store, self.log.partition_count(), operation, where, send, dry_run=dry_run
        )

    def flush(self, timeout: float = 30.0) -> int:
        return self._producer.flush(timeout)

    def close(self) -> None:
        try:
            self._producer.close()
        finally:
            if self._owns_log:
                try:
                    self.log.close()
                finally:
                    if self.store is not None:
                        self.store.close()

    def __enter__(self) -> SchedulerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self,
        op: Op,
        key: TaskKey,
        data: bytes = b"{}",
        on_durable: Callable[[], object] | None = None,
    ) -> Future[int]:
        try:
            return self._producer.send(
                key.ordering_id, encode(op, key, data), on_durable=on_durable
            )
        except Exception as error:
            return _failed(error)


def check_task(
    task: Task,
    *,
    grace_window_s: float = 10.0,
    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES,
    validate: Callable[[Task], None] | None = None,
) -> None:
    """Raise the `TaskRejected` error a client with these settings would refuse `task` with, now;
    send nothing. For producers that check a whole batch before sending any of it, without a
    connection (`scheduler enqueue-many` checks every line of a file first)."""
    _check_time_and_job(task, int(grace_window_s * 1000), validate)
    encode_data(task.data, max_bytes=max_data_bytes)


def _check_time_and_job(
    task: Task, grace_window_ms: int, validate: Callable[[Task], None] | None
) -> None:
    key = task.key
    late_ms = now_ms() - key.scheduled_ms
    if late_ms > grace_window_ms:
        late_s = late_ms / 1000
        # Seconds for a near miss; days and h:mm:ss for a date typed wrong by years.
        late = f"{late_s:.1f}s" if late_s < 60 else str(timedelta(seconds=round(late_s)))
        raise TaskInPastError(
            f"task {key} (due {key.scheduled_time.isoformat(timespec='seconds')}) is scheduled "
            f"{late} in the past, more than the grace window "
            f"of {grace_window_ms / 1000:g}s; schedule it for now or later (tasks within "
            "the window run as soon as possible)"
        )
    if validate is not None:
        validate(task)


_count_one = metrics.ENQUEUED.tick


def _count_enqueued(future: Future[int]) -> None:
    if future.exception() is None:
        metrics.ENQUEUED.add(future.result())


def _failed(error: BaseException) -> Future[int]:
    future: Future[int] = Future()
    future.set_exception(error)
    return future
