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
    from scheduler.client import SchedulerClient
    from scheduler.fleet.status import PartitionStatus
    from scheduler.programs.abc import RunStore
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

    def close(self) -> None:
        if self._runs is not None:
            self._runs.close()
        if self._launcher is not None:
            self._launcher.close()
        self.client.close()
