"""One side of `scheduler bench versus`: a backend and its worker, driven over stdin/stdout.

`versus` runs this file as a script with each checkout's own interpreter
(`<checkout>/.venv/bin/python -P versus_side.py KIND SCRATCH`), so that `import scheduler`
resolves to that checkout and its `scheduler worker` is the one measured. It therefore uses
only what every checkout since issue 47 began has: `scheduler.bench.workers.backend`,
`scheduler.bench.execute.drive`, `scheduler.bench.lag.steady` and the client.

Protocol: one JSON object per line. After the warm-up it prints `{"ready": ...}`; then each
request line (`{"op": "execute", "count": N}`, `{"op": "lag", "rate": R, "duration_s": D}`,
`{"op": "stop"}`) gets one answer line. Answers start with `VERSUS ` so that anything a library
prints to stdout is told apart. The worker's CPU time (user + system, from the kernel through
psutil) is read around each request; CPU per 10,000 tasks is that delta scaled.

`versus_side.py threads SCRATCH [smoke]` instead counts the OS threads of an embedded worker owning
`THREAD_PARTITIONS` partitions (`/proc/PID/task`): once it owns them all and is idle, and again
idle after `WARM_TASKS` tasks have run (a pool that starts its threads on demand has them then).
It prints one answer line and exits.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

PREFIX = "VERSUS "
WARM_TASKS = 2000
START_TIMEOUT_S = 600.0
"""A loaded machine's Cassandra can take minutes to answer a new keyspace's schema."""
THREAD_PARTITIONS = 64
IDLE_S = 3.0
"""How long the worker is left alone before its threads are counted ..."""
SMOKE_IDLE_S = 1.0
"""... and in a smoke run (`versus_side.py threads SCRATCH smoke`), which proves the count
works and measures nothing."""


def _answer(document: dict[str, Any]) -> None:
    sys.stdout.write(PREFIX + json.dumps(document) + "\n")
    sys.stdout.flush()


def _cpu_s(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _options(kind: str, scratch: str) -> Any:
    from scheduler.bench.common import BenchOptions
    from scheduler.config import env_config, load_settings

    config = env_config()
    return BenchOptions(
        size=None,
        repeat=1,
        smoke=False,
        out=Path(scratch),
        backends=(kind,),
        settings=load_settings(config),
        scratch=Path(scratch),
        config=Path(config) if config else None,
    )


def threads(scratch: str, idle_s: float = IDLE_S) -> None:
    from scheduler.bench import workers
    from scheduler.bench.common import EMBEDDED
    from scheduler.bench.execute import drive
    from scheduler.client import SchedulerClient

    # `backend`, `open_log` and `wait_assigned` read the module's partition count when called.
    workers.PARTITIONS = THREAD_PARTITIONS
    with workers.backend(EMBEDDED, _options(EMBEDDED, scratch), "threads") as run:
        worker = run.start_worker("threads")
        run.wait_assigned(START_TIMEOUT_S)
        time.sleep(idle_s)
        idle = _threads(worker.pid)
        client = SchedulerClient(log=run.log)
        try:
            drive(run, client, WARM_TASKS, "warm")
        finally:
            client.close()
        time.sleep(idle_s)
        _answer(
            {
                "partitions": THREAD_PARTITIONS,
                "owned": len(worker.assigned_partitions()),
                "threads_idle": idle,
                "threads_after_tasks": _threads(worker.pid),
            }
        )


def main(kind: str, scratch: str) -> None:
    from scheduler.bench.execute import drive
    from scheduler.bench.lag import steady
    from scheduler.bench.workers import backend
    from scheduler.client import SchedulerClient

    with backend(kind, _options(kind, scratch), "versus") as run:
        worker = run.start_worker("worker0")
        run.wait_assigned(START_TIMEOUT_S)
        client = SchedulerClient(log=run.log)
        try:
            drive(run, client, WARM_TASKS, "warm")  # imports, caches, the first batches
            _answer({"ready": True, "worker_pid": worker.pid})
            for counter, line in enumerate(sys.stdin):
                request = json.loads(line)
                if request["op"] == "stop":
                    break
                before = _cpu_s(worker.pid)
                if request["op"] == "execute":
                    count = int(request["count"])
                    values = drive(run, client, count, f"x{counter}")
                else:
                    values = steady(
                        run, client, request["rate"], request["duration_s"], f"l{counter}"
                    )
                    count = int(values["ran"])
                cpu_s = _cpu_s(worker.pid) - before
                values = {**values, "worker_cpu_s": cpu_s}
                values["cpu_s_per_10k"] = cpu_s * 10_000 / count if count else float("nan")
                _answer(values)
        finally:
            client.close()


if __name__ == "__main__":
    if sys.argv[1] == "threads":
        threads(sys.argv[2], SMOKE_IDLE_S if sys.argv[3:] == ["smoke"] else IDLE_S)
    else:
        main(sys.argv[1], sys.argv[2])
