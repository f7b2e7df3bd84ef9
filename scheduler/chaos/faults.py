"""Faults on processes, without Docker: kill -9, SIGSTOP and SIGCONT of a server the launcher
started (by the pid in its pid file, never by name) or of a worker process."""

from __future__ import annotations

import os
import signal
import time

from scheduler.services import launcher
from scheduler.services.errors import ServiceError
from scheduler.services.process import alive


def _pid(name: str) -> int:
    pid = launcher.pid(name)
    if pid is None:
        raise ServiceError(
            f"{name} is not running from this state dir ({launcher.state_dir()}): start the "
            "cluster with `scheduler services up --cluster` first"
        )
    return pid


def kill(name: str) -> int:
    """SIGKILL server ``name`` and wait until it is gone; its pid. `restart` brings it back."""
    srv = launcher.server(name)
    pid = _pid(name)
    os.kill(pid, signal.SIGCONT)  # a paused process dies just as well, but reap it promptly
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while alive(pid, srv.main_class) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


def pause(name: str) -> int:
    """SIGSTOP server ``name``: it keeps its sockets but answers nothing (a long GC, a VM stall)."""
    pid = _pid(name)
    os.kill(pid, signal.SIGSTOP)
    return pid


def resume(name: str) -> int:
    """SIGCONT server ``name`` after `pause`."""
    pid = _pid(name)
    os.kill(pid, signal.SIGCONT)
    return pid


def restart(name: str) -> None:
    """Start ``name`` again (after `kill`) on its data and wait until it answers."""
    launcher.start(name)


def pause_pid(pid: int) -> None:
    """SIGSTOP a process this run started (a worker)."""
    os.kill(pid, signal.SIGSTOP)


def resume_pid(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)
