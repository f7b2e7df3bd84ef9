"""The single-machine default: the embedded log, the SQLite store and a worker, in one process.

Two SQLite files in `data_dir`, `log.db` and `store.db`, so the poll loop and the partition
actors do not queue behind one database lock.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scheduler.client import SchedulerClient
from scheduler.engine.clock import SYSTEM_CLOCK, Clock
from scheduler.engine.lease import Lease
from scheduler.engine.settings import EngineSettings
from scheduler.executors.abc import Executor
from scheduler.logs.abc import TaskLog
from scheduler.model import TaskState, iso_ms
from scheduler.runtime import partition_count_check
from scheduler.stores.abc import TaskStore
from scheduler.worker import Worker

DEFAULT_PARTITIONS = 16


class EmbeddedScheduler:
    """A whole scheduler in one process: client, worker, embedded log and SQLite store."""

    def __init__(
        self,
        *,
        data_dir: str | Path | None,
        executor: Executor,
        partitions: int = DEFAULT_PARTITIONS,
        settings: EngineSettings = EngineSettings(),
        topic: str = "scheduler-tasks",
        grace_window_s: float = 10.0,
        wrap_store: Callable[[TaskStore], TaskStore] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        lease: Lease | None = None,
    ) -> None:
        """`clock` is the engine's time (the client's grace window reads the real clock);
        `lease`: the worker's (none by default: an embedded log has no group sessions)."""
        self._temporary = data_dir is None
        self.data_dir = (
            Path(tempfile.mkdtemp(prefix="scheduler-")) if data_dir is None else Path(data_dir)
        )
        # The embedded log and SQLite store, opened (created if needed).
        from scheduler.logs.embedded import EmbeddedTaskLog
        from scheduler.stores.sqlite import SqliteTaskStore

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log: TaskLog = EmbeddedTaskLog(path=str(self.data_dir / "log.db"), topic=topic)
        self.store: TaskStore = SqliteTaskStore(
            path=str(self.data_dir / "store.db"), bucket_ms=3_600_000, status_retention_s=7 * 86400
        )
        self.store.open(create_schema=True)
        partition_count_check(self.log, self.store, partitions)
        self.partitions = partitions
        # Executors that can tell a bad task up front (an unknown Spark job) refuse it at enqueue.
        self.client = SchedulerClient(
            log=self.log,
            grace_window_s=grace_window_s,
            validate=getattr(executor, "validate", None),
        )
        worker_store = wrap_store(self.store) if wrap_store is not None else self.store
        self.worker = Worker(
            log=self.log,
            store=worker_store,
            executor=executor,
            settings=settings,
            clock=clock,
            lease=lease,
        )
        self._running = False

    def start(self, wait_for_assignment_s: float = 30.0) -> EmbeddedScheduler:
        self._running = True
        try:
            self.worker.start()  # a log refusing the worker (another process on it) raises here
            if not self.worker.wait_until_assigned(wait_for_assignment_s):
                raise TimeoutError(
                    f"the embedded worker was not assigned its partitions within "
                    f"{wait_for_assignment_s:g}s"
                )
        except BaseException:
            self.stop()  # `with` does not call __exit__ when __enter__ raises
            raise
        return self

    def stop(self, *, now: bool = False) -> None:
        """Stop the worker (running tasks get `shutdown_deadline_s`, or none with `now=True`,
        and go back to pending if cancelled), then close the backends."""
        if self._running:
            self._running = False
            self.client.close()
            self.worker.stop(now=now)
            self.store.close()
            self.log.close()
        if self._temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedScheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def is_idle(self, *, include_future: bool = False) -> bool:
        """Every accepted task that is due has reached a final state (no retry is pending);
        with `include_future`, every accepted task."""
        self.client.flush()
        lags = self.log.describe_group(self.worker.group_id)
        if any(lag.lag > 0 for lag in lags):
            return False
        horizon = _END_OF_TIME_MS if include_future else None
        return bool(self.worker.topic.is_idle(horizon).get(timeout=60))

    def wait_until_idle(
        self, timeout: float = 30.0, *, include_future: bool = False, settle_s: float = 0.02
    ) -> None:
        """Block until `is_idle()` holds; raise TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not self.is_idle(include_future=include_future):
            if self.worker.fatal_error is not None:
                raise self.worker.fatal_error
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the scheduler was still busy after {timeout}s{self._busy_with()}"
                )
            time.sleep(settle_s)

    def _busy_with(self) -> str:
        """What a timed-out wait was waiting on: the first task not final, by due time (a
        schedule's next fire, left in this data directory, waits a long while)."""
        unfinished = (TaskState.PENDING, TaskState.RUNNING, TaskState.RETRYING)
        try:
            first = [
                view
                for partition in range(self.partitions)
                for view in self.store.list_tasks(partition, states=unfinished, limit=1)
            ]
        except Exception:  # the store failed: the timeout says enough without it
            return ""
        if not first:
            return ""
        view = min(first, key=lambda v: v.task.key)
        due = view.task.key.scheduled_ms
        later = " in the future" if due > self.worker.clock.now_ms() else ""
        return (
            f": the first task not final is {view.task.key} ({view.state}), due{later} at "
            f"{iso_ms(due)}; `SCHEDULER_DATA_DIR={self.data_dir} scheduler tasks list` lists them"
        )


#: A horizon past any task (year 10000).
_END_OF_TIME_MS = 253_402_300_800_000
