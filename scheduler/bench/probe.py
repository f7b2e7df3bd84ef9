"""The benchmark's executor: a no-op that notes when each task started against when it was due.

That difference is the engine's own firing lag (start - `task.scheduled_ms`). Two forms:

* `MemoryProbe`, for workers inside the bench process: appends to a list, and sets an event
  once the expected number of tasks has run.
* `probe_executor`, for `scheduler worker` subprocesses (`SCHEDULER_EXECUTOR=scheduler.bench.
  probe:probe_executor`): buffers fixed-width lines and a daemon thread appends them every
  50 ms to `$SCHEDULER_BENCH_PROBE.<pid>`, so a million tasks cost one write per burst, not per
  task, and the bench counts progress from file sizes without reading them.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from scheduler.executors.abc import ExecutionContext
from scheduler.model import Task

PROBE_ENV = "SCHEDULER_BENCH_PROBE"
"""The path prefix the subprocess probe writes `<prefix>.<pid>` files under."""
_LINE = "%013d %013d\n"
LINE_BYTES = 28
_FLUSH_S = 0.05


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class MemoryProbe:
    """An in-process no-op executor that records (scheduled_ms, start_ms) per attempt."""

    def __init__(self, expected: int = 0) -> None:
        self.records: list[tuple[int, int]] = []
        self.expected = expected
        self.done = threading.Event()
        self._lock = threading.Lock()

    def reset(self, expected: int) -> None:
        with self._lock:
            self.records = []
            self.expected = expected
            self.done.clear()

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        record = (task.key.scheduled_ms, _now_ms())
        with self._lock:
            self.records.append(record)
            if len(self.records) >= self.expected:
                self.done.set()


class _FileProbe:
    def __init__(self) -> None:
        self._buffer: list[str] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._path = ""

    def record(self, scheduled_ms: int, start_ms: int) -> None:
        line = _LINE % (scheduled_ms, start_ms)
        with self._lock:
            self._buffer.append(line)
            if self._thread is None:
                self._path = f"{os.environ[PROBE_ENV]}.{os.getpid()}"
                self._thread = threading.Thread(target=self._flush, name="probe", daemon=True)
                self._thread.start()

    def _flush(self) -> None:
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        while True:
            time.sleep(_FLUSH_S)
            with self._lock:
                lines, self._buffer = self._buffer, []
            if lines:
                os.write(fd, "".join(lines).encode("ascii"))


_probe = _FileProbe()


def probe_executor(task: Task, context: ExecutionContext) -> None:
    """No work; note the start time against the due time (see the module docstring)."""
    _probe.record(task.key.scheduled_ms, _now_ms())


def probe_files(prefix: Path) -> list[Path]:
    return sorted(prefix.parent.glob(prefix.name + ".*"))


def probe_count(prefix: Path) -> int:
    """Tasks recorded so far by every process writing under `prefix`."""
    return sum(path.stat().st_size for path in probe_files(prefix)) // LINE_BYTES


def read_probe(prefix: Path) -> list[tuple[int, int]]:
    """Every (scheduled_ms, start_ms) recorded under `prefix`, sorted by start."""
    records = []
    for path in probe_files(prefix):
        for line in path.read_text(encoding="ascii").splitlines():
            scheduled, _, start = line.partition(" ")
            if start:
                records.append((int(scheduled), int(start)))
    records.sort(key=lambda r: r[1])
    return records


def wait_for_count(
    prefix: Path, expected: int, timeout_s: float, alive: object = None, interval_s: float = 0.05
) -> int:
    """Wait until `expected` tasks were recorded (or the time is up); the count reached."""
    deadline = time.monotonic() + timeout_s
    count = probe_count(prefix)
    while count < expected and time.monotonic() < deadline:
        if callable(alive) and not alive():
            raise RuntimeError("a worker process exited during the benchmark")
        time.sleep(interval_s)
        count = probe_count(prefix)
    time.sleep(2 * _FLUSH_S)
    return probe_count(prefix)
