"""Commands a worker left running when it died without a stop (kill -9, a crash, the OOM killer).

A command runs in a process group of its own, so that a cancel reaches what it started (a JVM
under a wrapper script) and a terminal's Ctrl-C does not. The price: a worker killed with
SIGKILL cannot stop its commands, which run on while the task's next attempt starts, two
attempts of one ordering id at once. So each running command is noted in a file of
`<log_dir>/.running/` while it runs, and a worker starting on that data directory stops the
process groups of the notes whose worker is gone before it runs anything (`stop_left_running`).

A worker that never comes back is covered by its watcher (`watch`): a small process of its own
session that `scheduler worker` starts, holding the read end of a pipe whose write end only the
worker has. When the worker dies however it dies, the kernel closes that end; the watcher reads
its end of file, waits for the worker to be gone from `/proc` as a running process, and stops
the notes' commands at once, before another worker's next attempt of their tasks would start.
A worker that stops cleanly ended its commands already and tells the watcher so before closing.

This module imports nothing of the package: the watcher runs it as a script (`python -I`), a
bare interpreter that costs a few MB beside a worker.

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
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path

__all__ = ["RUNNING_DIR", "note_running", "stop_left_running", "watch"]

RUNNING_DIR = ".running"
"""The notes' directory, inside an executor's log directory."""
_PROC = Path("/proc")
logger = logging.getLogger("scheduler.executors.left_running")


_STOPPED = b"stopped"
"""What a worker writes to its watcher before closing the pipe at a clean stop."""


def _stat(pid: int) -> list[str] | None:
    """The fields of `/proc/<pid>/stat` after the command name (state, ppid, pgrp, ...)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields follow its last ")".
    return stat[stat.rindex(")") + 2 :].split()


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), or None if there is none."""
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def _runs(pid: int, since: int) -> bool:
    """Whether process `pid`, started at `since`, still runs: a zombie (dead, not yet reaped by
    its parent) runs nothing."""
    fields = _stat(pid)
    return fields is not None and int(fields[19]) == since and fields[0] != "Z"


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
        if _runs(worker, worker_since):
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


def watch(directories: Sequence[Path]) -> Callable[[], None]:
    """Start this process's watcher over the notes of `directories` (see the module doc); return
    what ends it, to call at a clean stop once the commands ended. Nothing is started where
    processes cannot be recognised (no `/proc`)."""
    if _where() is None:
        return lambda: None
    watcher = subprocess.Popen(
        [sys.executable, "-I", __file__, str(os.getpid()), *map(str, directories)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # a terminal's Ctrl-C or a kill of the worker's group misses it
    )
    assert watcher.stdin is not None
    pipe = watcher.stdin

    def stop() -> None:
        with suppress(OSError):
            pipe.write(_STOPPED)
            pipe.close()
        with suppress(subprocess.TimeoutExpired):
            watcher.wait(timeout=5)

    return stop


def _watch(worker: int, directories: Sequence[Path]) -> None:
    """The watcher's life: wait for the end of the pipe; unless the worker said it stopped,
    stop its commands."""
    said = sys.stdin.buffer.read()  # returns when the worker's end closes: its stop or death
    if said == _STOPPED:
        return
    # The kernel closes a dying process's files before it hands its children to another
    # parent; the notes are read once this process has been handed over.
    deadline = time.monotonic() + 5.0
    while os.getppid() == worker and time.monotonic() < deadline:
        time.sleep(0.01)
    for directory in directories:
        stop_left_running(directory)


if __name__ == "__main__":
    logging.Formatter.converter = time.gmtime
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s.%(msecs)03dZ %(levelname)-5s %(name)s: %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch(int(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]])
