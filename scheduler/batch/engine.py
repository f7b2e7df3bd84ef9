"""The `batch` executor route: a configuration's batch jobs run as engine tasks in ONE queue,
`batch:<name>` (see docs/batch-jobs.md, "On the engine", for why one queue).

Every change is a task of that queue, so the configuration and the job states have one writer:

* `load` applies a new configuration as a diff (`scheduler jobs load`, the file poll).
* `poll` re-reads the configuration file: a valid one is loaded and renamed `<file>_IMPORTED`,
  an invalid one is logged with its reasons and left in place; the next poll is a task at the
  next multiple of the polling time (workers starting at different times join one chain).
  Every other task first looks at the file (a stat) and applies it if it changed: a poll waits
  behind the runs' ends queued before its instant, the next task does not.
* `wake` is due when a partition's time comes or a retry is due: retention, then a decision.
* `ended` records the end of a partition's run (from its program-status event).
* `rerun`, `pause`, `resume` are an operator's.
* `recover` (on worker start) checks the runs of RUNNING partitions: one that ended is
  recorded, one never launched is launched.

Every op ends with a decision: `runnable` under the global and per-job limits, and each started
partition launched as a run (`launching.launch_request`). Launches are made durable before the
states are saved: a decision executed again after a crash finds the same partitions with the
same attempt numbers, so the same request keys, and the engine launches each once.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from scheduler.batch import metrics as batch_metrics
from scheduler.batch.config import Configuration, Job, parse_configuration
from scheduler.batch.decide import runnable
from scheduler.batch.durations import add, format_partition
from scheduler.batch.errors import BatchConfigError
from scheduler.batch.launching import control_task, launch_request, request_key
from scheduler.batch.partitions import launch
from scheduler.batch.reload import apply
from scheduler.batch.state import (
    JobState,
    Outcome,
    apply_retention,
    finish,
    new_state,
    rerun,
    start,
)
from scheduler.batch.store import (
    DEFAULT_NAME,
    Attempt,
    AttemptStatus,
    BatchStore,
    Changes,
    StoredConfiguration,
)
from scheduler.client import SchedulerClient
from scheduler.engine.clock import now_ms
from scheduler.errors import TaskDataError
from scheduler.executors.abc import ExecutionContext
from scheduler.model import Task
from scheduler.programs.abc import RunStore
from scheduler.programs.model import RunStatus, run_id_for

logger = logging.getLogger(__name__)

IMPORTED_SUFFIX = "_IMPORTED"
"""A loaded configuration file is renamed with this suffix, as the seed does."""

_OUTCOME_STATUS = {
    Outcome.SUCCEEDED: AttemptStatus.SUCCEEDED,
    Outcome.MARKED_SUCCESS: AttemptStatus.MARKED_SUCCESS,
    Outcome.RETRY: AttemptStatus.FAILED,
    Outcome.GAVE_UP: AttemptStatus.FAILED,
}


@dataclass
class _Session:
    """What one task reads, changes and writes back."""

    stored: StoredConfiguration | None
    config: Configuration | None
    states: dict[str, JobState]
    changed: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    attempts: list[Attempt] = field(default_factory=list)
    """Attempts started or ended, written with the states at the task's end."""
    config_changed: bool = False
    imported: Path | None = None
    """The polled file this task applied: renamed once the configuration is written, so a
    crash before the write leaves the file to be read again, and a reader never finds the
    file renamed and its configuration not yet stored."""

    def put(self, state: JobState) -> None:
        self.states[state.job] = state
        self.changed.add(state.job)


class BatchExecutor:
    """Runs the tasks of the batch queue of configuration `name` (route name: `batch`)."""

    def __init__(
        self,
        *,
        store: BatchStore,
        runs: RunStore,
        client: SchedulerClient,
        name: str = DEFAULT_NAME,
        file: str | Path | None = None,
        clock: Callable[[], int] = now_ms,
        timeout_s: float = 60.0,
        poll_ms: int = 120_000,
    ) -> None:
        self.store = store
        self.runs = runs
        self.client = client
        self.name = name
        self.file = None if file is None else Path(file)
        self.clock = clock
        """What the decisions read as now (epoch ms); tests step it."""
        self.timeout_s = timeout_s
        self.poll_ms = poll_ms
        """How often the file is polled while no configuration is in force (the setting
        `batch_poll_s`)."""
        self._parsed: tuple[str, Configuration] | None = None
        self._seen: tuple[int, int, int] | None = None
        """The (mtime ns, size, inode) of the file as last read: a task looks at the file
        again only once it changed."""

    # -- tasks ----------------------------------------------------------------------------

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        data = task.data
        op = data.get("op")
        began = time.perf_counter()
        session = self._read()
        read = time.perf_counter()
        if op != "poll" and self._file_changed():
            # A new file is applied by whatever task of the queue runs next, not by the poll
            # queued behind the runs' ends: a busy queue reloads within one task.
            self._poll_file(session)
        if op == "load":
            self._load(session, str(data["text"]), str(data.get("source") or "api"))
        elif op == "poll":
            self._poll(session)
        elif op == "wake":
            self._retention(session)
        elif op == "ended":
            self._ended(session, data)
        elif op == "rerun":
            self._rerun(session, data)
        elif op in ("pause", "resume"):
            self._pause(session, str(data["job"]), op == "pause")
        elif op == "recover":
            self._recover(session)
        elif op != "decide":
            raise TaskDataError(
                f"task {task.key} asks the batch executor for op {op!r}; use load, poll, wake, "
                "ended, rerun, pause, resume, recover or decide"
            )
        applied = time.perf_counter()
        self._decide(session)
        decided = time.perf_counter()
        self._write(session)
        if session.imported is not None:
            os.replace(session.imported, f"{session.imported}{IMPORTED_SUFFIX}")
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "batch task %s (%s): read %.1f ms, %s %.1f ms, decide and launch %.1f ms, "
                "write %.1f ms (%d attempts, %d states)",
                task.key, op, (read - began) * 1e3, op, (applied - read) * 1e3,
                (decided - applied) * 1e3, (time.perf_counter() - decided) * 1e3,
                len(session.attempts), len(session.changed),
            )  # fmt: skip

    def _read(self) -> _Session:
        stored, states = self.store.read(self.name)
        config = None if stored is None else self._parse(stored.text)
        return _Session(stored, config, states)

    def _parse(self, text: str) -> Configuration:
        # Every task reads the configuration in force: parse a text once, not per task.
        if self._parsed is None or self._parsed[0] != text:
            self._parsed = (text, parse_configuration(text))
        return self._parsed[1]

    def _write(self, session: _Session) -> None:
        changed = {
            job: session.states[job]
            for job in session.changed
            if job in session.states and job not in session.removed
        }
        configuration = session.stored if session.config_changed else None
        changes = Changes(changed, frozenset(session.removed), session.attempts, configuration)
        if changes:
            self.store.write(changes, self.name)
        for job in session.removed:
            self.store.delete_job(job, self.name)
        if session.config is not None:
            every = session.config_changed and not session.changed
            batch_metrics.observe(
                session.config, session.states, self.clock(), None if every else session.changed
            )

    # -- configuration ----------------------------------------------------------------------

    def _load(self, session: _Session, text: str, source: str) -> None:
        try:
            new = parse_configuration(text)
        except BatchConfigError as error:
            logger.error("batch configuration from %s not applied: %s", source, error)
            return
        now = self.clock()
        if session.config is None:
            states = {job.name: session.states.get(job.name) or new_state(job) for job in new.jobs}
            logger.info("batch configuration %r loaded from %s", self.name, source)
        else:
            change, states = apply(session.config, new, session.states)
            logger.info(
                "batch configuration %r reloaded from %s: added %s, removed %s, changed %s",
                self.name, source, list(change.added), list(change.removed), dict(change.changed),
            )  # fmt: skip
        for job in session.states.keys() - states.keys():
            session.removed.add(job)
        session.states = states
        session.changed.update(states)
        paused = session.stored.paused if session.stored else frozenset()
        wake = session.stored.wake_ms if session.stored else None
        names = {job.name for job in new.jobs}
        session.stored = StoredConfiguration(text, now, paused & names, wake, source)
        session.config = new
        session.config_changed = True

    def _poll(self, session: _Session) -> None:
        self._file_changed()
        self._poll_file(session)
        self.schedule_poll(session.config)

    def _file_changed(self) -> bool:
        """Whether the file differs from the one last read (a stat, no read)."""
        if self.file is None:
            return False
        try:
            seen = self.file.stat()
        except OSError:
            self._seen = None
            return False
        signature = (seen.st_mtime_ns, seen.st_size, seen.st_ino)
        if signature == self._seen:
            return False
        self._seen = signature
        return True

    def _poll_file(self, session: _Session) -> None:
        """Apply the file if it is there and valid (renamed once written); log it if not."""
        if self.file is not None and self.file.is_file():
            text = self.file.read_text(encoding="utf-8")
            try:
                parse_configuration(text)
            except BatchConfigError as error:
                # Left in place: the operator fixes it and the next poll reads it again.
                kept = (
                    "the last good one stays in force"
                    if session.config is not None
                    else "no batch configuration is in force yet; the next poll reads it again"
                )
                logger.error(
                    "batch configuration file %s is not valid; %s: %s", self.file, kept, error
                )
            else:
                self._load(session, text, str(self.file))
                session.imported = self.file

    def schedule_poll(self, config: Configuration | None, *, period_ms: int | None = None) -> None:
        """The next `poll` task at the next multiple of the polling time (the configuration's
        `new_configuration_polling_time`, or `period_ms` or `poll_ms` before there is one)."""
        if self.file is None:
            return
        period = period_ms or self.poll_ms
        if config is not None:
            now = self.clock()
            period = max(add(now, config.new_configuration_polling_time) - now, 1)
        at = (self.clock() // period + 1) * period
        self._enqueue(control_task(self.name, "poll", self._engine_ms(at), "poll"))

    def _pause(self, session: _Session, job: str, paused: bool) -> None:
        if session.stored is None or session.config is None:
            return
        if job not in session.config.by_name:
            logger.warning("no batch job %r to %s", job, "pause" if paused else "resume")
            return
        names = session.stored.paused | {job} if paused else session.stored.paused - {job}
        session.stored = replace(session.stored, paused=frozenset(names))
        session.config_changed = True

    # -- runs -------------------------------------------------------------------------------

    def _ended(self, session: _Session, data: Mapping[str, Any]) -> None:
        job, partition, attempt = str(data["job"]), int(data["partition"]), int(data["attempt"])
        state = session.states.get(job)
        running = None if state is None else state.running.get(partition)
        if state is None or running is None or running.attempt != attempt:
            logger.info(
                "run %s of %s %s (attempt %d) ended after its partition moved on; kept in the "
                "history only", data["run_id"], job, format_partition(partition), attempt,
            )  # fmt: skip
            return
        succeeded = data["status"] == str(RunStatus.COMPLETED)
        reason = ""
        if not succeeded:
            run = self.runs.get(str(data["run_id"]))
            reason = (run.last_error if run else None) or f"the run ended {data['status']}"
        now = self.clock()
        state, outcome = finish(state, partition, succeeded, now, reason)
        session.put(state)
        if session.config is not None and job not in session.config.by_name and not state.running:
            session.removed.add(job)  # removed by a reload: its last run has ended
        session.attempts.append(
            Attempt(
                job, partition, attempt, str(data["run_id"]), _OUTCOME_STATUS[outcome],
                running.started_ms, now, reason or None,
            )
        )  # fmt: skip

    def _recover(self, session: _Session) -> None:
        """Runs of RUNNING partitions: ended ones recorded, never-launched ones launched."""
        for job, state in list(session.states.items()):
            for partition, running in list(state.running.items()):
                history = self.store.attempts(job, self.name, partition=partition, limit=1)
                if not history or history[0].attempt != running.attempt:
                    continue
                run = self.runs.get(history[0].run_id)
                if run is not None and run.status.is_terminal:
                    self._ended(
                        session,
                        {"job": job, "partition": partition, "attempt": running.attempt,
                         "run_id": run.run_id, "status": str(run.status)},
                    )  # fmt: skip
                elif run is None and session.config is not None and job in session.config.by_name:
                    request = launch_request(
                        launch(session.config.job(job), partition), running.attempt, self.name,
                        now_ms(),
                    )  # fmt: skip
                    self._enqueue(request.task())

    def _rerun(self, session: _Session, data: Mapping[str, Any]) -> None:
        if session.config is None:
            return
        first, stop = int(data["first_ms"]), int(data["stop_ms"])
        todo = [(str(data["job"]), first, stop)]
        seen: set[tuple[str, int, int]] = set()
        while todo:
            job, lo, hi = todo.pop()
            state = session.states.get(job)
            # A chain of self-dependencies walks to the job's end, and no further.
            if (job, lo, hi) in seen or state is None or lo >= state.grid.end:
                continue
            seen.add((job, lo, hi))
            session.put(rerun(session.states[job], lo, hi))
            if data.get("with_dependants"):
                todo.extend(_dependants(session.config, job, lo, hi))

    def _retention(self, session: _Session) -> None:
        if session.config is None:
            return
        now = self.clock()
        for job in session.config.jobs:
            state = session.states.get(job.name)
            if state is None:
                continue
            kept, cutoff = apply_retention(job, state, now)
            if kept != state:
                session.put(kept)
            if cutoff is not None:
                self.store.delete_attempts_before(job.name, cutoff, self.name)

    # -- the decision -----------------------------------------------------------------------

    def _decide(self, session: _Session) -> None:
        config = session.config
        if config is None or session.stored is None:
            return
        now = self.clock()
        paused = session.stored.paused
        effective = replace(
            config,
            jobs=tuple(
                replace(j, max_parallelism=0) if j.name in paused else j for j in config.jobs
            ),
        )
        futures: list[Future[int]] = []
        attempts: list[Attempt] = []
        chosen_all = runnable(effective, session.states, now)
        wanted: dict[str, list[int]] = {}
        for chosen in chosen_all:
            wanted.setdefault(chosen.job, []).append(chosen.partition)
        last = self.store.last_attempts(wanted, self.name) if wanted else {}
        for chosen in chosen_all:
            job = config.job(chosen.job)
            state = start(session.states[chosen.job], job, chosen.partition, now)
            state = _numbered(state, chosen.partition, last.get((chosen.job, chosen.partition)))
            number = state.running[chosen.partition].attempt
            request = launch_request(chosen, number, self.name, self._engine_ms(now))
            futures.append(self.client.schedule_task(request.task()))
            session.put(state)
            attempts.append(
                Attempt(
                    chosen.job, chosen.partition, number, request.run_id,
                    AttemptStatus.RUNNING, now,
                )
            )  # fmt: skip
        for future in futures:  # durable before the states say RUNNING
            future.result(self.timeout_s)
        session.attempts.extend(attempts)
        wake = _next_wake(effective, session.states, now)
        if wake is not None and wake != session.stored.wake_ms:
            self._enqueue(control_task(self.name, "wake", self._engine_ms(wake), "wake"))
            session.stored = replace(session.stored, wake_ms=wake)
            session.config_changed = True

    def _engine_ms(self, at: int) -> int:
        """The engine's time of an instant of `clock` (the same with the wall clock)."""
        return now_ms() + (at - self.clock())

    def _enqueue(self, task: Task) -> None:
        self.client.schedule_task(task).result(self.timeout_s)


def _numbered(state: JobState, partition: int, last: int | None) -> JobState:
    """The started `partition` numbered after every attempt in its history (`last`, the
    highest): a rerun partition's next run is a new attempt (a new request key), never one the
    engine has completed."""
    run = state.running[partition]
    if last is None or last < run.attempt:
        return state
    run = replace(run, attempt=last + 1)
    return replace(state, running=MappingProxyType({**state.running, partition: run}))


def _next_wake(config: Configuration, states: Mapping[str, JobState], now: int) -> int | None:
    """The next instant a partition becomes due or a retry is due, after `now`."""
    found: list[int] = []
    for job in config.jobs:
        state = states.get(job.name)
        if state is None or job.max_parallelism == 0:
            continue
        grid = state.grid
        due = grid.due(now)
        if due < grid.count:
            found.append(grid.at(due + 1))
        found.extend(f.retry_at for f in state.failed.values() if f.retry_at and f.retry_at > now)
    return min(found) if found else None


def _dependants(config: Configuration, job: str, lo: int, hi: int) -> list[tuple[str, int, int]]:
    """The jobs waiting for `job`'s partitions in [lo, hi), with their partitions that do."""
    found = []
    for other in config.jobs:
        for dependency in other.dependencies:
            if dependency.job != job:
                continue
            reach = dependency.to or dependency.shift
            first = add(lo, reach.negated()) + (1 if dependency.to is not None else 0)
            found.append((other.name, first, add(hi, dependency.shift.negated())))
    return found


def run_id_of(job: Job, partition_ms: int, attempt: int) -> str:
    """The run id of an attempt of a partition of `job`."""
    program = launch(job, partition_ms)
    from scheduler.batch.launching import program_of

    return run_id_for(program_of(program), request_key(job.name, partition_ms, attempt))
