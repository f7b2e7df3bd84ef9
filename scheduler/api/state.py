"""What the API's handlers share: the settings, the client and store of the deployment, the
tokens, the dashboard's logins and the fleet's recent history. One per app."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.api.auth import Sessions, TokenFile

if TYPE_CHECKING:
    from scheduler.batch.api import BatchJobs
    from scheduler.batch.store import BatchStore
    from scheduler.client import SchedulerClient
    from scheduler.fleet.status import PartitionStatus
    from scheduler.programs.abc import RunStore
    from scheduler.schedules.abc import ScheduleStore
    from scheduler.schedules.client import SchedulesClient
    from scheduler.settings import Settings
    from scheduler.stores.abc import TaskStore


@dataclass(frozen=True, slots=True)
class FleetSample:
    """The group's totals at one moment, for the dashboard's sparklines."""

    at: float
    """Wall-clock seconds."""
    committed: int
    """Records the group has committed, all partitions together."""
    lag: int
    overdue: int


class FleetHistory:
    """The last samples of the group's totals, taken when someone looks (at most one every
    `every_s`): throughput is the committed offsets' rate between two samples."""

    def __init__(self, size: int = 60, every_s: float = 2.0) -> None:
        self.every_s = every_s
        self._samples: deque[FleetSample] = deque(maxlen=size)
        self._lock = threading.Lock()

    def record(self, rows: list[PartitionStatus], now: float | None = None) -> None:
        now = time.time() if now is None else now
        sample = FleetSample(
            now,
            sum(row.committed or 0 for row in rows),
            sum(row.lag for row in rows),
            sum(row.overdue for row in rows),
        )
        with self._lock:
            if self._samples and now - self._samples[-1].at < self.every_s:
                return
            self._samples.append(sample)

    def samples(self) -> list[FleetSample]:
        with self._lock:
            return list(self._samples)

    def throughput(self) -> list[float]:
        """Records committed per second between consecutive samples."""
        samples = self.samples()
        return [
            max(0.0, (b.committed - a.committed) / max(b.at - a.at, 1e-3))
            for a, b in itertools.pairwise(samples)
        ]


@dataclass
class ApiState:
    settings: Settings
    client: SchedulerClient
    store: TaskStore
    tokens: TokenFile
    sessions: Sessions = field(default_factory=Sessions)
    history: FleetHistory = field(default_factory=FleetHistory)
    _runs: RunStore | None = None
    _launcher: SchedulerClient | None = None
    _schedules: ScheduleStore | None = None
    _batch: BatchStore | None = None
    _runs_lock: threading.Lock = field(default_factory=threading.Lock)

    def launcher(self) -> SchedulerClient:
        """A client for the launch requests of runs started by hand, as `scheduler runs start`
        sends them: built by the scheduler from a declared program, they go to the workers'
        `workflow` executor, which the task check of `client` (the configured executor's) does
        not know."""
        with self._runs_lock:
            if self._launcher is None:
                from scheduler.client import SchedulerClient

                self._launcher = SchedulerClient(
                    log=self.client.log, grace_window_s=self.settings.grace_window_s
                )
            return self._launcher

    def run_store(self) -> RunStore:
        """The run store, opened on first use: a keyspace without the run tables fails the
        runs routes (saying to run `scheduler schema apply`), not the whole API."""
        with self._runs_lock:
            if self._runs is None:
                from scheduler.programs.runtime import open_run_store

                create = self.settings.store == "sqlite"
                self._runs = open_run_store(self.settings, self.store, create_schema=create)
            return self._runs

    def schedules(self) -> SchedulesClient:
        """A `SchedulesClient` on the deployment's schedule store (opened on first use), as
        `scheduler schedules` builds it: changes are tasks of the schedules route (sent, like
        runs started by hand, without the configured executor's check) and are waited for until
        a worker applied them."""
        from scheduler.programs.runtime import load_catalog
        from scheduler.schedules.client import SchedulesClient

        with self._runs_lock:
            if self._schedules is None:
                from scheduler.schedules.runtime import open_schedule_store

                create = self.settings.store == "sqlite"
                self._schedules = open_schedule_store(
                    self.settings, self.store, create_schema=create
                )
            store = self._schedules
        catalog = load_catalog(self.settings) if self.settings.programs_file is not None else None
        return SchedulesClient(store=store, client=self.launcher(), catalog=catalog, wait_s=30.0)

    def batch_jobs(self) -> BatchJobs:
        """`BatchJobs` of the configuration `batch_name` on the batch store (opened on first
        use), as `scheduler jobs` builds it."""
        from scheduler.batch.api import BatchJobs

        with self._runs_lock:
            if self._batch is None:
                from scheduler.batch.runtime import open_batch_store

                create = self.settings.store == "sqlite"
                self._batch = open_batch_store(self.settings, self.store, create_schema=create)
            store = self._batch
        return BatchJobs(store=store, client=self.launcher(), name=self.settings.batch_name)

    def close(self) -> None:
        if self._batch is not None:
            self._batch.close()
        if self._schedules is not None:
            self._schedules.close()
        if self._runs is not None:
            self._runs.close()
        if self._launcher is not None:
            self._launcher.close()
        self.client.close()
