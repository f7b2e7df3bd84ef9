"""`scheduler worker` as a child process, and what its log says about its partitions."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Protocol

from scheduler.model import to_epoch_ms

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
        core_dumps_in: Path | None = None,
    ) -> None:
        """`core_dumps_in`: run the worker in this directory with core dumps enabled (`ulimit
        -c unlimited`, through a shell that then execs it, so its pid is the worker's): a
        native crash leaves a `core` file there (with the kernel's usual `core_pattern`) to
        read with gdb. Its paths in `env` must be absolute."""
        self.name = name
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, **env, "SCHEDULER_CLIENT_ID": name}
        self._log: IO[bytes] = open(self.log_path, "ab")  # noqa: SIM115 - closed in wait()
        self.started_at = time.monotonic()
        command = [scheduler_script(), "worker", *extra_args]
        if core_dumps_in is not None:
            core_dumps_in.mkdir(parents=True, exist_ok=True)
            command = ["/bin/sh", "-c", 'ulimit -c unlimited && exec "$@"', "sh", *command]
        self.process = subprocess.Popen(
            command,
            cwd=core_dumps_in,
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
