"""Detached JVM processes tracked by pid files, plus the small checks every server shares.

The servers must outlive the `scheduler services up` command that starts them, so they run in
their own session (no SIGHUP when the terminal goes) with output appended to a log file.  A pid
file alone is not proof: pids are recycled, so a pid only counts as ours while its command line
still names the server's main class.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from scheduler.services.errors import ServiceError

_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def _java_candidates() -> list[str]:
    """Places to look for a Java 17, best first; duplicates and missing files dropped."""
    found: list[str] = []
    home = os.environ.get("JAVA_HOME")
    on_path = shutil.which("java")
    for candidate in (
        str(Path(home) / "bin" / "java") if home else None,
        on_path,
        *sorted(str(p) for p in Path("/usr/lib/jvm").glob("*17*/bin/java")),
    ):
        if candidate and Path(candidate).is_file() and candidate not in found:
            found.append(candidate)
    return found


def java_major(java: str) -> int:
    """Major version of ``java`` (17 for 17.0.15, 8 for 1.8.0)."""
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = _JAVA_VERSION.search(out.stderr + out.stdout)
    if match is None:
        raise ServiceError(f"cannot tell the version of {java}: {out.stderr.strip()!r}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


_WHY_17 = (
    "the local servers need Java 17 (Cassandra 5.0 runs only on Java 11/17 and Java 24+ cannot "
    "install its security manager; Kafka 4.x brokers need 17+)"
)


def require_java17() -> str:
    """Return a Java 17 binary or raise an error that says how to get one.

    ``$SCHEDULER_SERVICES_JAVA`` is taken as given (and must be 17). Otherwise the first Java 17
    among $JAVA_HOME, `java` on PATH and /usr/lib/jvm/*17* wins, so a newer default JDK on the
    machine does not break the servers.
    """
    explicit = os.environ.get("SCHEDULER_SERVICES_JAVA")
    candidates = [explicit] if explicit else _java_candidates()
    seen: list[str] = []
    for java in candidates:
        major = java_major(java)
        if major == 17:
            return java
        seen.append(f"{java} is Java {major}")
    if not seen:
        raise ServiceError(
            f"no `java` found, and {_WHY_17}. Install one (e.g. `apt-get install "
            "openjdk-17-jre-headless`) or set JAVA_HOME or SCHEDULER_SERVICES_JAVA to it."
        )
    raise ServiceError(
        f"{'; '.join(seen)}, but {_WHY_17}. Install Java 17 or set SCHEDULER_SERVICES_JAVA "
        "(or JAVA_HOME) to it, e.g. /usr/lib/jvm/java-17-openjdk-amd64/bin/java."
    )


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def alive(pid: int, marker: str) -> bool:
    """True if ``pid`` runs and its command line contains ``marker`` (the main class)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1]
    except OSError:
        return False
    if state.startswith("Z"):
        return False  # a zombie child of this very process is dead for our purposes
    return marker in cmdline


def running_pid(pid_file: Path, marker: str) -> int | None:
    """The live pid recorded in ``pid_file``; a stale pid file is removed and gives None."""
    pid = read_pid(pid_file)
    if pid is not None and alive(pid, marker):
        return pid
    pid_file.unlink(missing_ok=True)
    return None


def spawn(argv: Sequence[str], *, cwd: Path, log_file: Path, pid_file: Path) -> int:
    """Start ``argv`` detached from this process, logging to ``log_file``; write its pid."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log, open(os.devnull, "rb") as devnull:
        log.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting\n".encode())
        log.flush()
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=devnull,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives the launcher and the terminal
            close_fds=True,
        )
    # Right after exec, /proc/<pid>/cmdline is briefly empty; wait it out so that `alive`
    # (which looks for the main class there) does not mistake a starting server for a dead one.
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline and not cmdline.read_bytes():
        time.sleep(0.01)
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def run_tool(argv: Sequence[str], *, what: str, timeout: float = 120) -> str:
    """Run a short-lived JVM tool to completion; raise with its output when it fails."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise ServiceError(
            f"{what} failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr).strip()}"
        )
    return proc.stdout


def terminate(pid: int, marker: str, *, grace: float = 30.0) -> None:
    """SIGTERM ``pid`` (both servers shut down cleanly on it), SIGKILL after ``grace`` s.

    A process a fault test paused (SIGSTOP) is continued first, or it could not act on SIGTERM.
    """
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        _reap(pid)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap(pid)
            if not alive(pid, marker):
                return
            time.sleep(0.2)
    raise ServiceError(f"process {pid} ({marker}) did not exit after SIGKILL")


def _reap(pid: int) -> None:
    """Collect the exit status if ``pid`` is our own child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def log_tail(log_file: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, for error messages."""
    try:
        text = log_file.read_text(errors="replace")
    except OSError:
        return f"(no log at {log_file})"
    return "\n".join(text.splitlines()[-lines:])
