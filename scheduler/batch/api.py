"""The batch jobs from Python: what `scheduler jobs` runs.

    jobs = BatchJobs(store=batch_store, client=client)
    jobs.load(Path("jobs.json").read_text())          # checked here, applied by the engine
    jobs.partitions("job1", statuses={Status.FAILED})
    jobs.rerun("job1", parse_partition("2000-01-01 00:00:00"),
               parse_partition("2000-01-02 00:00:00"), with_dependants=True)

Reads go to the store directly; every change is a task in the configuration's queue
(`batch:<name>`), applied by a worker in order with everything else the jobs do.

Given the deployment's `file` (the setting `batch_file`), the reads show that file's jobs while
the store holds no configuration yet (no worker has polled it): every partition as its time and
dependencies make it, none run. Changes wait for the configuration to be in force.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from scheduler.applying import ApplyWait
from scheduler.batch.config import Configuration, parse_configuration
from scheduler.batch.decide import Summary, View, summary, views
from scheduler.batch.durations import format_partition
from scheduler.batch.errors import (
    BatchConfigError,
    BatchNotAppliedError,
    EmptyRangeError,
    UnknownJobError,
)
from scheduler.batch.launching import control_task
from scheduler.batch.state import Status
from scheduler.batch.store import DEFAULT_NAME, Attempt, BatchStore, StoredConfiguration
from scheduler.client import SchedulerClient
from scheduler.engine.clock import now_ms

logger = logging.getLogger(__name__)
NOT_APPLIED = " (not applied yet)"
"""Ends the `source` of a configuration read from the file before any worker applied it."""


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job as `scheduler jobs list` shows it."""

    name: str
    paused: bool
    """Paused by an operator (the file's max_parallelism 0 pauses too, and shows as 0)."""
    max_parallelism: int
    counts: Summary


def check(text: str | bytes) -> Configuration:
    """The configuration of `text`, or `BatchConfigError` with every problem."""
    return parse_configuration(text)


class BatchJobs:
    """The batch jobs of configuration `name`: read from `store`, changed through `client`."""

    def __init__(
        self,
        *,
        store: BatchStore,
        client: SchedulerClient | None = None,
        name: str = DEFAULT_NAME,
        clock: Callable[[], int] = now_ms,
        timeout_s: float = 30.0,
        file: Path | None = None,
    ) -> None:
        self.store = store
        self.client = client
        self.name = name
        self.clock = clock
        self.timeout_s = timeout_s
        self.file = file
        """The deployment's jobs file: read while the store holds no configuration."""

    # -- reads ------------------------------------------------------------------------------

    def stored(self) -> StoredConfiguration | None:
        """The configuration in force, else the valid `file` not applied yet (its `source`
        ends with `NOT_APPLIED`, its `loaded_ms` is the file's modification time)."""
        stored = self.store.configuration(self.name)
        if stored is not None or self.file is None:
            return stored
        from_file = self._from_file()
        if from_file is None:
            # A worker writes the configuration, then renames the file: one applied between
            # the two reads is in the store now.
            return self.store.configuration(self.name)
        return from_file

    def _from_file(self) -> StoredConfiguration | None:
        if self.file is None:
            return None
        try:
            text = self.file.read_text(encoding="utf-8")
            modified = int(self.file.stat().st_mtime * 1000)
            parse_configuration(text)
        except FileNotFoundError:
            return None  # not written yet, or applied and renamed
        except (OSError, UnicodeDecodeError, BatchConfigError) as error:
            logger.warning("batch file %s is not shown: %s", self.file, error)
            return None
        return StoredConfiguration(text, modified, source=f"{self.file}{NOT_APPLIED}")

    def configuration(self) -> Configuration | None:
        """The configuration in force (or the file's), None before the first load."""
        stored = self.stored()
        return None if stored is None else parse_configuration(stored.text)

    def _config(self, *, in_force: bool = False) -> tuple[Configuration, StoredConfiguration]:
        stored = self.stored()
        if stored is None:
            raise UnknownJobError(
                f"no batch configuration {self.name!r} is loaded; load one with "
                "`scheduler jobs load FILE`"
            )
        if in_force and stored.source.endswith(NOT_APPLIED):
            raise UnknownJobError(
                f"batch configuration {self.name!r} is not in force yet: a worker with "
                f"batch_file applies {self.file} at its next poll; try again then"
            )
        return parse_configuration(stored.text), stored

    def _job(self, config: Configuration, job: str) -> None:
        if job not in config.by_name:
            raise UnknownJobError(
                f"no batch job is named {job!r}; the jobs are {sorted(config.by_name)}"
            )

    def jobs(self) -> list[JobRow]:
        """Every job of the configuration in force, with its partitions counted by state."""
        config, stored = self._config()
        states, now = self.store.states(self.name), self.clock()
        return [
            JobRow(
                job.name,
                job.name in stored.paused,
                job.max_parallelism,
                summary(config, states, job.name, now),
            )
            for job in config.jobs
        ]

    def partitions(
        self,
        job: str,
        *,
        statuses: Collection[Status] | None = None,
        first: int = 0,
        limit: int = 1000,
    ) -> list[View]:
        """`job`'s partitions from index `first` (at most `limit` looked at), of `statuses`
        only if given, each with what it waits for or why it never will run."""
        config, _ = self._config()
        self._job(config, job)
        found = views(config, self.store.states(self.name), job, self.clock(), first, limit)
        return [v for v in found if statuses is None or v.status in statuses]

    def history(self, job: str, *, partition: int | None = None, limit: int = 100) -> list[Attempt]:
        """The attempts of `job` (of one partition), newest first."""
        return self.store.attempts(job, self.name, partition=partition, limit=limit)

    # -- changes ----------------------------------------------------------------------------

    def _send(self, op: str, **data: object) -> str:
        if self.client is None:
            raise RuntimeError("BatchJobs needs a client to change anything")
        # Tasks due in one millisecond run in key order: a key led by the send time in ns
        # keeps an operator's pause-then-decide in the order they were sent.
        key = f"{time.time_ns():020d}:{op}:{uuid.uuid4()}"
        task = control_task(self.name, op, now_ms(), key, **data)
        self.client.schedule_task(task).result(self.timeout_s)
        return key

    def load(self, text: str, *, source: str = "api", wait_s: float | None = None) -> Configuration:
        """Check `text` (`BatchConfigError` lists every problem) and have it applied as a diff
        by the engine; returns the configuration. With `wait_s`, also wait until a worker has
        put it in force (`BatchNotAppliedError` after that long: no worker runs batch jobs)."""
        config = parse_configuration(text)
        if wait_s is None:
            self._send("load", text=text, source=source)
            return config
        before = self.store.configuration(self.name)
        self._send("load", text=text, source=source)
        self._wait_applied(text, before, wait_s)
        return config

    def _wait_applied(self, text: str, before: StoredConfiguration | None, wait_s: float) -> None:
        """Until the store holds `text` as loaded after `before` (the same text loaded again
        gets a newer `loaded_ms`)."""
        wait = ApplyWait(
            wait_s,
            lambda left: logger.info(
                "no worker has put the batch configuration %r in force yet; waiting up to "
                "%.0f s more (only workers with batch_file set run batch jobs)",
                self.name,
                left,
            ),
        )
        while True:
            stored = self.store.configuration(self.name)
            if (
                stored is not None
                and stored.text == text
                and (before is None or before.text != text or stored.loaded_ms > before.loaded_ms)
            ):
                return
            if wait.over():
                raise BatchNotAppliedError(
                    f"the batch configuration {self.name!r} was sent, but no worker applied it "
                    f"within {wait_s:g}s: is a worker running with batch_file set "
                    "(SCHEDULER_BATCH_FILE)? Only such workers run batch jobs; once one runs, "
                    "load the file again"
                )
            time.sleep(0.2)

    def rerun(
        self, job: str, first_ms: int, stop_ms: int, *, with_dependants: bool = False
    ) -> None:
        """Run `job`'s partitions in [first_ms, stop_ms) again, those that succeeded or were
        marked success included (and their dependants' if `with_dependants`)."""
        config, _ = self._config(in_force=True)
        self._job(config, job)
        if stop_ms <= first_ms:
            raise EmptyRangeError(
                f"the range's end {format_partition(stop_ms)} must be after its start "
                f"{format_partition(first_ms)}: [start, end) holds no partition"
            )
        self._send(
            "rerun", job=job, first_ms=first_ms, stop_ms=stop_ms, with_dependants=with_dependants
        )

    def pause(self, job: str) -> None:
        """Start no new partition of `job` (running ones go on) until `resume`."""
        config, _ = self._config(in_force=True)
        self._job(config, job)
        self._send("pause", job=job)

    def resume(self, job: str) -> None:
        config, _ = self._config(in_force=True)
        self._job(config, job)
        self._send("resume", job=job)
