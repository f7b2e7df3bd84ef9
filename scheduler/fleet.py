"""A harness for fleets of real worker processes: record every attempt, then check the history.

Used by the multi-process tests (`tests/distributed/`) and the benchmark command. The pieces:

* `recording_executor`, which workers load through `SCHEDULER_EXECUTOR=scheduler.fleet:
  recording_executor`, appends a JSON line when an attempt starts and one when it ends to the file
  named by `SCHEDULER_FLEET_RECORD`. Every worker appends to the same file with `O_APPEND`, so
  lines from several processes never interleave.
* `WorkerProcess` runs `scheduler worker` as a child process with a given environment.
* `LoadGenerator` enqueues a steady load, each ordering id's tasks in key order.
* `read_history` and `check_history` turn the record into a verdict: what is missing,
  duplicated, out of order or overlapping.

Times are wall-clock epoch milliseconds, comparable across the processes of one machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import IO, Any, Protocol

from scheduler.executors.abc import ExecutionContext
from scheduler.model import Task, TaskKey, from_epoch_ms, to_epoch_ms

RECORD_ENV = "SCHEDULER_FLEET_RECORD"
"""The environment variable naming the file `recording_executor` appends to."""

KeyTuple = tuple[str, int, str]
"""A task key as plain data: (ordering_id, scheduled_ms, uniqueness_key)."""


# -- the recording executor -------------------------------------------------------------------


class _Recorder:
    """One append-only descriptor per record file and process, shared by the pool's threads."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self._lock = threading.Lock()

    def write(self, line: Mapping[str, Any]) -> None:
        path = os.environ.get(RECORD_ENV)
        if not path:
            raise RuntimeError(
                f"{RECORD_ENV} is not set; recording_executor needs a file to append to"
            )
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            fd = self._fds.get(path)
            if fd is None:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                self._fds[path] = fd
        # One write() per line: with O_APPEND the kernel places it atomically at the end.
        os.write(fd, data)


_recorder = _Recorder()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def recording_executor(task: Task, context: ExecutionContext) -> None:
    """Record the attempt, sleep `data["sleep_ms"]`, fail while `attempt <= fail_attempts`."""
    key = task.key
    base = {
        "ordering_id": key.ordering_id,
        "scheduled_ms": key.scheduled_ms,
        "uniqueness_key": key.uniqueness_key,
        "attempt": context.attempt,
        "worker": os.getpid(),
        "partition": context.partition,
    }
    start_ms = _now_ms()
    _recorder.write({**base, "event": "start", "start_ms": start_ms})
    ok = False
    try:
        sleep_s = float(task.data.get("sleep_ms", 0)) / 1000
        if sleep_s > 0 and context.cancelled.wait(sleep_s):
            context.raise_if_cancelled()
        context.raise_if_cancelled()
        if int(task.data.get("fail_attempts", 0)) >= context.attempt:
            raise RuntimeError(f"attempt {context.attempt} of {key} fails on purpose")
        ok = True
    finally:
        _recorder.write(
            {**base, "event": "end", "start_ms": start_ms, "end_ms": _now_ms(), "ok": ok}
        )


# -- reading and checking the history ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Execution:
    """One attempt as recorded by `recording_executor`."""

    ordering_id: str
    scheduled_ms: int
    uniqueness_key: str
    attempt: int
    """1 for the first attempt."""
    worker: int
    """The pid of the worker process that ran it."""
    partition: int
    """The log partition of the task."""
    start_ms: int
    end_ms: int | None
    """None when the attempt never ended (its worker was killed while it ran)."""
    ok: bool
    """True when the attempt succeeded."""

    @property
    def key(self) -> KeyTuple:
        return (self.ordering_id, self.scheduled_ms, self.uniqueness_key)


def read_history(path: Path | str) -> list[Execution]:
    """Every attempt in the record file, matching start and end lines; sorted by start time.

    A start without an end is an attempt whose process died during it (`end_ms` None, not ok).
    A torn last line (a process killed mid-write) is ignored.
    """
    started: dict[tuple[KeyTuple, int, int, int], dict[str, Any]] = {}
    ended: list[dict[str, Any]] = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            continue
        ident = (_key(line), line["attempt"], line["worker"], line["start_ms"])
        if line.get("event") == "start":
            started[ident] = line
        else:
            started.pop(ident, None)
            ended.append(line)
    executions = [_execution(line) for line in ended]
    executions += [_execution(line) for line in started.values()]
    executions.sort(key=lambda e: (e.start_ms, e.end_ms or 0))
    return executions


def _key(line: Mapping[str, Any]) -> KeyTuple:
    return (line["ordering_id"], int(line["scheduled_ms"]), line["uniqueness_key"])


def _execution(line: Mapping[str, Any]) -> Execution:
    end = line.get("end_ms")
    return Execution(
        ordering_id=line["ordering_id"],
        scheduled_ms=int(line["scheduled_ms"]),
        uniqueness_key=line["uniqueness_key"],
        attempt=int(line["attempt"]),
        worker=int(line["worker"]),
        partition=int(line.get("partition", -1)),
        start_ms=int(line["start_ms"]),
        end_ms=None if end is None else int(end),
        ok=bool(line.get("ok", False)),
    )


def as_key_tuple(key: TaskKey | Iterable[Any]) -> KeyTuple:
    """(ordering_id, scheduled_ms, uniqueness_key) of a `TaskKey` or such a tuple."""
    if isinstance(key, TaskKey):
        return (key.ordering_id, key.scheduled_ms, key.uniqueness_key)
    ordering_id, scheduled, uniqueness_key = key
    if isinstance(scheduled, datetime):
        scheduled = TaskKey(ordering_id, scheduled, uniqueness_key).scheduled_ms
    return (str(ordering_id), int(scheduled), str(uniqueness_key))


@dataclass
class HistoryReport:
    """What `check_history` found. `ok` holds when nothing is missing, out of order or
    overlapping; duplicates are reported, and judged by the caller (allowed after a crash)."""

    accepted: int
    """Keys the producers had acknowledged."""
    executed: int
    """Distinct keys with at least one successful attempt (accepted or not)."""
    attempts: int
    """Attempts recorded, failed and unfinished ones included."""
    missing: list[KeyTuple] = field(default_factory=list)
    """Accepted keys that never completed successfully."""
    duplicates: dict[KeyTuple, int] = field(default_factory=dict)
    """Keys with more than one successful attempt, and how many they had."""
    order_violations: list[tuple[KeyTuple, KeyTuple]] = field(default_factory=list)
    """(earlier key, later key) pairs of one ordering id whose first successful runs started
    the other way round."""
    concurrent_violations: list[tuple[Execution, Execution]] = field(default_factory=list)
    """Two finished attempts of one ordering id that overlapped in time."""
    unfinished: list[Execution] = field(default_factory=list)
    """Attempts that started and never ended (their worker died)."""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.order_violations or self.concurrent_violations)

    def summary(self) -> str:
        return (
            f"accepted {self.accepted}, executed {self.executed}, attempts {self.attempts}, "
            f"missing {len(self.missing)}, duplicates {len(self.duplicates)}, "
            f"order violations {len(self.order_violations)}, "
            f"concurrent violations {len(self.concurrent_violations)}, "
            f"unfinished {len(self.unfinished)}"
        )


def check_history(
    accepted: Collection[TaskKey | Iterable[Any]], executions: Iterable[Execution]
) -> HistoryReport:
    """Compare what was accepted with what ran.

    The order check assumes each ordering id's tasks were enqueued in key order (as
    `LoadGenerator` does): then their first successful runs must start in key order.
    """
    wanted = {as_key_tuple(key) for key in accepted}
    attempts = list(executions)
    successes: dict[KeyTuple, list[Execution]] = defaultdict(list)
    by_ordering_id: dict[str, list[Execution]] = defaultdict(list)
    unfinished: list[Execution] = []
    for execution in attempts:
        if execution.ok:
            successes[execution.key].append(execution)
        if execution.end_ms is None:
            unfinished.append(execution)
        else:
            by_ordering_id[execution.ordering_id].append(execution)
    report = HistoryReport(
        accepted=len(wanted), executed=len(successes), attempts=len(attempts), unfinished=unfinished
    )
    report.missing = sorted(wanted - successes.keys(), key=_schedule_order)
    report.duplicates = {key: len(runs) for key, runs in successes.items() if len(runs) > 1}

    firsts: dict[str, list[Execution]] = defaultdict(list)
    for runs in successes.values():
        first = min(runs, key=lambda e: e.start_ms)
        firsts[first.ordering_id].append(first)
    for runs in firsts.values():
        runs.sort(key=lambda e: (e.start_ms, e.end_ms or 0))
        for before, after in pairwise(runs):
            if _schedule_order(after.key) < _schedule_order(before.key):
                report.order_violations.append((before.key, after.key))

    for runs in by_ordering_id.values():
        runs.sort(key=lambda e: e.start_ms)
        latest: Execution | None = None
        for execution in runs:
            if latest is not None and latest.end_ms and execution.start_ms < latest.end_ms:
                report.concurrent_violations.append((latest, execution))
            if latest is None or (execution.end_ms or 0) > (latest.end_ms or 0):
                latest = execution
    return report


def _schedule_order(key: KeyTuple) -> tuple[int, str, str]:
    return (key[1], key[0], key[2])


# -- rebalance pauses -------------------------------------------------------------------------


@dataclass
class RebalanceReport:
    """How one rebalance looked from the tasks' side."""

    began_ms: int
    """When it began (the old owner's revocation, or the kill)."""
    moved: dict[int, tuple[int, int]]
    """Partition -> (old owner's pid, new owner's pid)."""
    resumed_after_ms: dict[int, int]
    """Moved partition -> ms from `began_ms` to its first execution on the new owner."""
    handover_gap_ms: dict[int, int]
    """Moved partition -> ms from its last execution's end on the old owner to its first start
    on the new one: how long the partition's tasks stood still."""
    kept_max_gap_ms: int
    """Largest gap between execution starts on a partition that stayed, during the rebalance."""
    baseline_max_gap_ms: int
    """The same, over every partition, in a quiet window of the same length just before."""
    stalled: list[int] = field(default_factory=list)
    """Partitions busy just before the rebalance that ran nothing in the window."""

    def summary(self) -> str:
        resumed = sorted(self.resumed_after_ms.values())
        gaps = sorted(self.handover_gap_ms.values())
        return (
            f"moved {sorted(self.moved)}: resumed {_spread(resumed)} ms after the rebalance "
            f"began, handover gap {_spread(gaps)} ms; kept partitions' largest gap "
            f"{self.kept_max_gap_ms} ms (baseline {self.baseline_max_gap_ms} ms)"
            + (f"; stalled {self.stalled}" if self.stalled else "")
        )


def _spread(values: list[int]) -> str:
    if not values:
        return "-"
    return f"{values[0]}..{values[-1]}" if len(values) > 1 else str(values[0])


def measure_rebalance(
    executions: Iterable[Execution], *, began_ms: int, until_ms: int
) -> RebalanceReport:
    """Which partitions moved in the rebalance that began at `began_ms`, how soon they ran
    again, and whether the others paused; `until_ms` ends the window (before the next change).

    A partition's owner before is the worker of its last attempt started before `began_ms`, its
    owner after the worker of its last attempt started in the window. Needs a steady load on
    every partition, or idle partitions look like pauses.
    """
    window = until_ms - began_ms
    before: dict[int, Execution] = {}
    starts: dict[int, list[Execution]] = defaultdict(list)
    baseline: dict[int, list[int]] = defaultdict(list)
    for execution in sorted(executions, key=lambda e: e.start_ms):
        if execution.start_ms < began_ms:
            before[execution.partition] = execution
            if execution.start_ms >= began_ms - window:
                baseline[execution.partition].append(execution.start_ms)
        elif execution.start_ms <= until_ms:
            starts[execution.partition].append(execution)
    report = RebalanceReport(began_ms, {}, {}, {}, 0, _max_gap(baseline.values()))
    kept: list[list[int]] = []
    for partition, runs in starts.items():
        old = before.get(partition)
        new_owner = runs[-1].worker
        if old is None or old.worker == new_owner:
            kept.append([*([old.start_ms] if old else []), *(e.start_ms for e in runs)])
            continue
        first = next(e for e in runs if e.worker == new_owner)
        old_end = max(
            (e.end_ms or e.start_ms for e in [old, *runs] if e.worker == old.worker),
            default=old.start_ms,
        )
        report.moved[partition] = (old.worker, new_owner)
        report.resumed_after_ms[partition] = first.start_ms - began_ms
        report.handover_gap_ms[partition] = first.start_ms - old_end
    report.kept_max_gap_ms = _max_gap(kept)
    report.stalled = sorted(set(baseline) - set(starts))
    return report


def _max_gap(series: Iterable[list[int]]) -> int:
    return max((b - a for starts in series for a, b in pairwise(sorted(starts))), default=0)


# -- worker processes -------------------------------------------------------------------------


def scheduler_script() -> str:
    """The `scheduler` console script beside this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / "scheduler"
    if beside.is_file():
        return str(beside)
    return shutil.which("scheduler") or "scheduler"


class GroupView(Protocol):
    """What `WorkerProcess.wait_until_owning` needs of a log (`KafkaTaskLog` has it)."""

    def describe_group(self, group_id: str) -> Any: ...


_ASSIGNED = re.compile(r"\bassigned partitions \[([\d, ]*)\]")
_REVOKED = re.compile(r"\b(?:revoked|lost) partitions \[([\d, ]*)\]")
_EVENT = re.compile(r"\b(assigned|revoked|lost) partitions \[([\d, ]*)\]")


class WorkerProcess:
    """`scheduler worker` in a child process; its stdout and stderr go to `log_path`.

    `name` becomes the worker's client id (`SCHEDULER_CLIENT_ID`), which is how the group
    names the owner of each partition.
    """

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        name: str,
        log_path: Path,
        extra_args: Iterable[str] = (),
    ) -> None:
        self.name = name
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, **env, "SCHEDULER_CLIENT_ID": name}
        self._log: IO[bytes] = open(self.log_path, "ab")  # noqa: SIM115 - closed in wait()
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(
            [scheduler_script(), "worker", *extra_args],
            env=environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then wait up to `timeout` s (then SIGKILL); the exit status."""
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> int:
        """SIGKILL: no shutdown at all, like a machine that died."""
        if self.alive:
            self.process.kill()
        return self.wait(30.0)

    def wait(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(30.0)
        self._log.close()
        return code

    def output(self) -> str:
        """Everything the worker wrote so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def partition_events(self) -> list[tuple[int, str, set[int]]]:
        """(epoch ms, "assigned" | "revoked" | "lost", partitions) from the worker's log lines.

        Needs the text log format (the default), whose lines begin with an ISO timestamp.
        """
        events: list[tuple[int, str, set[int]]] = []
        for line in self.output().splitlines():
            match = _EVENT.search(line)
            if match is None:
                continue
            moment = datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00"))
            events.append((to_epoch_ms(moment), match.group(1), _numbers(match.group(2))))
        return events

    def assigned_partitions(self) -> set[int]:
        """The partitions this worker owns, according to its own log lines."""
        owned: set[int] = set()
        for line in self.output().splitlines():
            if (match := _ASSIGNED.search(line)) is not None:
                owned |= _numbers(match.group(1))
            elif (match := _REVOKED.search(line)) is not None:
                owned -= _numbers(match.group(1))
        return owned

    def wait_until_owning(
        self,
        timeout: float,
        *,
        log: GroupView | None = None,
        group_id: str | None = None,
        at_least: int = 1,
    ) -> set[int]:
        """Wait until this worker owns `at_least` partitions; return them.

        With `log` and `group_id` the group's own view is asked (`describe_group`), else the
        worker's log lines are read. Raises if the worker exits or the time runs out.
        """
        deadline = time.monotonic() + timeout
        owned: set[int] = set()
        while True:
            if not self.alive:
                raise RuntimeError(
                    f"worker {self.name} exited with {self.returncode} before owning partitions:"
                    f"\n{self.output()[-3000:]}"
                )
            if log is not None and group_id is not None:
                try:
                    rows = log.describe_group(group_id)
                    owned = {row.partition for row in rows if row.owner == self.name}
                except Exception:
                    owned = set()
            else:
                owned = self.assigned_partitions()
            if len(owned) >= at_least:
                return owned
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"worker {self.name} owns {sorted(owned)} after {timeout:g} s, wanted "
                    f"{at_least} partition(s):\n{self.output()[-3000:]}"
                )
            time.sleep(0.2)


def _numbers(text: str) -> set[int]:
    return {int(part) for part in text.split(",") if part.strip()}


# -- load -------------------------------------------------------------------------------------


class _Scheduling(Protocol):
    def schedule_task(self, task: Task) -> Future[int]: ...


TaskData = Callable[[int, str], Mapping[str, Any]]
"""`data(sequence, ordering_id)`: the data of the n-th task (0-based, over all ordering ids)."""


class LoadGenerator:
    """A steady load of tasks on a background thread.

    Tasks go round-robin over `ordering_ids` ids at `rate_per_s` for `duration_s`, each due
    `lead_ms` after it is sent. Within an ordering id, due times strictly increase and the
    uniqueness keys are sequence numbers, so every id's tasks are enqueued in key order.
    Only tasks whose futures resolved (the log acknowledged them) count as accepted.
    """

    def __init__(
        self,
        client: _Scheduling,
        *,
        ordering_ids: int,
        rate_per_s: float,
        duration_s: float,
        lead_ms: int,
        data: TaskData | None = None,
        prefix: str = "load",
    ) -> None:
        if ordering_ids < 1 or rate_per_s <= 0 or duration_s < 0:
            raise ValueError("ordering_ids >= 1, rate_per_s > 0 and duration_s >= 0 please")
        self.client = client
        self.ids = [f"{prefix}-{n:03d}" for n in range(ordering_ids)]
        self.rate_per_s = rate_per_s
        self.duration_s = duration_s
        self.lead_ms = lead_ms
        self.data = data or (lambda sequence, ordering_id: {})
        self._futures: list[tuple[KeyTuple, Future[int]]] = []
        self._last_ms: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-load", daemon=True)
        self.sent = 0
        """Tasks handed to the client so far."""
        self.failed: list[tuple[KeyTuple, BaseException]] = []
        """Tasks whose futures failed (filled in by `join`)."""
        self.started_ms: int | None = None
        self.finished_ms: int | None = None

    def start(self) -> LoadGenerator:
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the load early."""
        self._stop.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float = 120.0) -> list[KeyTuple]:
        """Wait for the load to end and its futures to settle; the accepted keys."""
        self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        accepted: list[KeyTuple] = []
        self.failed = []
        for key, future in list(self._futures):
            try:
                future.result(max(0.0, deadline - time.monotonic()))
            except Exception as error:
                self.failed.append((key, error))
            else:
                accepted.append(key)
        return accepted

    def _run(self) -> None:
        self.started_ms = _now_ms()
        start = time.monotonic()
        sequence = 0
        while not self._stop.is_set():
            elapsed = time.monotonic() - start
            if elapsed >= self.duration_s:
                break
            due = min(int(elapsed * self.rate_per_s) + 1, int(self.duration_s * self.rate_per_s))
            while sequence < due and not self._stop.is_set():
                self._send(sequence)
                sequence += 1
            time.sleep(0.005)
        self.finished_ms = _now_ms()

    def _send(self, sequence: int) -> None:
        ordering_id = self.ids[sequence % len(self.ids)]
        scheduled_ms = max(_now_ms() + self.lead_ms, self._last_ms.get(ordering_id, 0) + 1)
        self._last_ms[ordering_id] = scheduled_ms
        uniqueness_key = f"{sequence:09d}"
        task = Task(
            ordering_id,
            from_epoch_ms(scheduled_ms),
            uniqueness_key,
            dict(self.data(sequence, ordering_id)),
        )
        key = (ordering_id, task.key.scheduled_ms, uniqueness_key)
        assert key[1] == scheduled_ms, "a due time must survive the round trip to the ms"
        try:
            future = self.client.schedule_task(task)
        except Exception as error:
            future = Future()
            future.set_exception(error)
        self._futures.append((key, future))
        self.sent += 1
