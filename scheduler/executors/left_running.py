"""Commands a worker left running when it died without a stop (kill -9, a crash, the OOM killer).

A command runs in a process group of its own, so that a cancel reaches what it started (a JVM
under a wrapper script) and a terminal's Ctrl-C does not. The price: a worker killed with
SIGKILL cannot stop its commands, which run on while the task's next attempt starts, two
attempts of one ordering id at once. So each running command is noted in a file of
`<log_dir>/.running/` while it runs, and a worker starting on that data directory stops the
process groups of the notes whose worker is gone before it runs anything (`stop_left_running`).

This covers a worker restarted on its host, the embedded mode's case. A worker that never comes
back leaves its commands to whatever supervises the host: systemd's default `KillMode` and a
container's end kill the whole group of processes with the worker (docs/operating.md).

Linux only: processes are recognised by their start time in `/proc/<pid>/stat`, so a pid the
kernel gave to another process since is never signalled. Elsewhere nothing is noted or stopped.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

__all__ = ["RUNNING_DIR", "note_running", "stop_left_running"]

RUNNING_DIR = ".running"
"""The notes' directory, inside an executor's log directory."""
_PROC = Path("/proc")
logger = logging.getLogger("scheduler.executors.left_running")


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), or None if there is none."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # After the command name, which may hold spaces and parentheses: state, ppid, pgrp, ...
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def _group(pgid: int, since: int) -> Iterator[int]:
    """The processes of group `pgid` that started at `since` or later (its leader's start)."""
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        # A zombie runs nothing: it waits for init to reap it.
        if int(fields[2]) == pgid and int(fields[19]) >= since and fields[0] != "Z":
            yield int(entry.name)


def note_running(directory: Path, pid: int, task: str) -> Callable[[], None]:
    """Note that this process runs command `pid` (its group's leader) for `task`; return what
    removes the note once the command is reaped."""
    started, mine = _started(pid), _started(os.getpid())
    if started is None or mine is None:
        return lambda: None  # no /proc: nothing can be recognised later
    note = directory / f"{pid}.json"
    seen = {"pid": pid, "started": started, "task": task}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        note.write_text(json.dumps({**seen, "worker": os.getpid(), "worker_started": mine}))
    except OSError as error:  # the command runs all the same, as it did before notes
        logger.warning("cannot note running command %d of task %s: %s", pid, task, error)
        return lambda: None
    return lambda: note.unlink(missing_ok=True)


def stop_left_running(directory: Path, *, grace_s: float = 5.0) -> list[str]:
    """Stop the commands noted in `directory` whose worker is gone: SIGTERM to each group, then
    SIGKILL to what is left after `grace_s`. Returns the tasks whose commands were stopped.
    Notes of a live worker (another one on this data directory) are left alone."""
    stopped: list[tuple[str, int, int, int]] = []
    for note in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            seen = json.loads(note.read_text())
            pgid, since, task = int(seen["pid"]), int(seen["started"]), str(seen["task"])
            worker, worker_since = int(seen["worker"]), int(seen["worker_started"])
        except (OSError, ValueError, KeyError, TypeError):
            note.unlink(missing_ok=True)  # half-written by a worker killed while writing it
            continue
        if _started(worker) == worker_since:
            continue  # its worker still runs it
        if any(_group(pgid, since)):
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            stopped.append((task, pgid, since, worker))
        else:
            note.unlink(missing_ok=True)
    deadline = time.monotonic() + grace_s
    for task, pgid, since, worker in stopped:
        while any(_group(pgid, since)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if any(_group(pgid, since)):
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            killed_by = time.monotonic() + 1.0  # the kernel ends them soon after, not at once
            while any(_group(pgid, since)) and time.monotonic() < killed_by:
                time.sleep(0.01)
        (directory / f"{pgid}.json").unlink(missing_ok=True)
        logger.warning(
            "stopped the command of task %s (process group %d) that worker process %d left "
            "running when it died; the task's next attempt runs instead",
            task,
            pgid,
            worker,
        )
    return [task for task, *_ in stopped]
