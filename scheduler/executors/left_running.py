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
kernel gave to another process since is never signalled, and a note counts only on the boot and
in the pid namespace it was written in (a data directory shared by containers holds notes whose
pids mean other processes here: they are left to their own container). Elsewhere nothing is
noted or stopped.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import time
from collections.abc import Callable
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


def _members(pgid: int, since: int) -> list[int]:
    """The live processes of the group whose leader started at `since`: none once the number
    leads another group. (While any member lives, the kernel gives its group's number to no
    new process, so members of that number are the command's even after its leader ended.)"""
    leader = _started(pgid)
    if leader is not None and leader != since:
        return []
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        # A zombie runs nothing: it waits for init to reap it.
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _where() -> tuple[str, str] | None:
    """This machine's boot and this process's pid namespace: where a pid names a process."""
    try:
        boot = (_PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
        space = os.readlink(_PROC / "self" / "ns" / "pid")  # `pid:[4026531836]`
    except OSError:
        return None
    return boot, space.strip("pid:[]")


@functools.cache
def _process(pid: int) -> tuple[int | None, tuple[str, str] | None]:
    """The start time, boot and pid namespace of this process (`os.getpid()`): read once, not
    per command."""
    return _started(pid), _where()


def note_running(directory: Path, pid: int, task: str) -> Callable[[], None]:
    """Note that this process runs command `pid` (its group's leader) for `task`; return what
    removes the note once the command is reaped."""
    started, (mine, where) = _started(pid), _process(os.getpid())
    if started is None or mine is None or where is None:
        return lambda: None  # no /proc: nothing can be recognised later
    boot, space = where
    note = directory / f"{space}-{pid}.json"
    seen = {"pid": pid, "started": started, "task": task, "boot": boot, "pid_namespace": space}
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
    stopped: list[tuple[str, int, int, int, Path]] = []
    where = _where()
    if where is None or not directory.is_dir():
        return []
    for note in sorted(directory.glob("*.json")):
        try:
            seen = json.loads(note.read_text())
            pgid, since, task = int(seen["pid"]), int(seen["started"]), str(seen["task"])
            worker, worker_since = int(seen["worker"]), int(seen["worker_started"])
            boot, space = str(seen["boot"]), str(seen["pid_namespace"])
        except (OSError, ValueError, KeyError, TypeError):
            note.unlink(missing_ok=True)  # half-written by a worker killed while writing it
            continue
        if boot != where[0]:
            note.unlink(missing_ok=True)  # from before a reboot: nothing of it runs
            continue
        if space != where[1]:
            continue  # another container's: its pids name other processes here
        if _started(worker) == worker_since:
            continue  # its worker still runs it
        if _members(pgid, since):
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            stopped.append((task, pgid, since, worker, note))
        else:
            note.unlink(missing_ok=True)
    deadline = time.monotonic() + grace_s
    for task, pgid, since, worker, note in stopped:
        while _members(pgid, since) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _members(pgid, since):
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            killed_by = time.monotonic() + 1.0  # the kernel ends them soon after, not at once
            while _members(pgid, since) and time.monotonic() < killed_by:
                time.sleep(0.01)
        note.unlink(missing_ok=True)
        logger.warning(
            "stopped the command of task %s (process group %d) that worker process %d left "
            "running when it died; the task's next attempt runs instead",
            task,
            pgid,
            worker,
        )
    return [task for task, *_ in stopped]
