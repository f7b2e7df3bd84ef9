"""A chaos worker runs in a directory of its own with core dumps enabled, so that a native crash
(the open SIGSEGV at start of docs/reliability.md) leaves a core file to read."""

from __future__ import annotations

import time
from pathlib import Path

from scheduler.fleet import WorkerProcess


def _core_limit(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max core file size"):
            return line.split()[4]
    raise AssertionError(f"no core limit in /proc/{pid}/limits")


def _is_the_worker(cmdline: str) -> bool:
    arguments = cmdline.rstrip("\0").split("\0")
    return arguments[0] != "/bin/sh" and arguments[-1] == "worker"


def test_a_worker_started_with_core_dumps_runs_in_its_directory_with_no_core_size_limit(
    tmp_path: Path,
) -> None:
    cores = tmp_path / "cores" / "w1-1"
    env = {
        "SCHEDULER_LOG": "embedded",
        "SCHEDULER_STORE": "sqlite",
        "SCHEDULER_DATA_DIR": str(tmp_path / "data"),
        "SCHEDULER_PARTITIONS": "2",
        "SCHEDULER_LOG_LEVEL": "INFO",
    }
    worker = WorkerProcess(env, name="w1", log_path=tmp_path / "w1.log", core_dumps_in=cores)
    try:
        deadline = time.monotonic() + 60
        # The shell execs the worker: the pid is the same, its command line changes twice. Right
        # after the fork it is still pytest's (cwd already changed, no ulimit yet), then the
        # shell's, and only then the worker's: wait for the last one, not merely "not the shell".
        while not _is_the_worker(Path(f"/proc/{worker.pid}/cmdline").read_text()):
            assert worker.alive, worker.output()
            assert time.monotonic() < deadline, "the shell never became the worker"
            time.sleep(0.05)
        assert Path(f"/proc/{worker.pid}/cwd").resolve() == cores.resolve()
        assert _core_limit(worker.pid) == "unlimited"
        # And it is a worker like any other: it takes its partitions and stops cleanly.
        while not worker.partition_events():
            assert worker.alive, worker.output()
            assert time.monotonic() < deadline, worker.output()
            time.sleep(0.05)
    finally:
        assert worker.stop(60) == 0, worker.output()
