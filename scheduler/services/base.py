"""What the launcher needs to know about one server: jars, config, command line, health check.

Kafka and Cassandra each implement :class:`Server`; the launcher owns everything generic (pid
files, locking, waiting, stopping) so the two server modules only describe their server.
"""

from __future__ import annotations

import abc
import os
from dataclasses import dataclass
from pathlib import Path

from scheduler.services.maven import Artifact

HOST = "127.0.0.1"
"""Both servers bind loopback only: they are for tests and local runs, never for a network."""


@dataclass(frozen=True)
class ServerPaths:
    """Where one server keeps its files under the state dir (default ``.services/<name>``)."""

    root: Path
    """``<state dir>/<name>``: config, data, logs and the pid file of this server."""
    cache: Path
    """``<state dir>/cache``: per-server POMs and resolved lib dirs, reused by every `up`."""

    @property
    def conf(self) -> Path:
        return self.root / "conf"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pid_file(self) -> Path:
        return self.root / "server.pid"

    @property
    def log_file(self) -> Path:
        """stdout+stderr of the JVM; both servers log to the console, so this is the server log."""
        return self.logs / "server.log"

    @property
    def lock_file(self) -> Path:
        return self.root / "launcher.lock"

    def make(self) -> None:
        for d in (self.conf, self.data, self.logs, self.cache):
            d.mkdir(parents=True, exist_ok=True)


class Server(abc.ABC):
    """One local server the launcher can fetch, configure, start and check."""

    name: str
    """Short name used on the command line and in paths: ``kafka`` or ``cassandra``."""
    main_class: str
    """JVM main class; also how a pid is recognised as this server (pids get recycled)."""
    startup_timeout: float
    """Seconds `start` waits for the health check before giving up with the log tail."""
    host: str = HOST
    """The loopback address the server binds (a cluster's Cassandra nodes each have their own)."""

    @property
    @abc.abstractmethod
    def port(self) -> int:
        """The client port (Kafka bootstrap / CQL native transport)."""

    @property
    @abc.abstractmethod
    def ports(self) -> list[int]:
        """Every port the server binds; all must be free before it starts."""

    @property
    def distribution(self) -> str:
        """Name of the jar cache (``<state dir>/cache/<distribution>``) the server runs from."""
        return self.name

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @abc.abstractmethod
    def artifacts(self) -> list[Artifact]:
        """Maven coordinates whose runtime closure is the server's classpath."""

    @abc.abstractmethod
    def configure(self, java: str, paths: ServerPaths, jars: list[Path]) -> None:
        """Write config files (every start, so code changes take effect) and format storage."""

    @abc.abstractmethod
    def argv(self, java: str, paths: ServerPaths, jars: list[Path]) -> list[str]:
        """The full `java ...` command line of the server."""

    @abc.abstractmethod
    def check(self, timeout: float) -> None:
        """Raise unless the server answers a real protocol request within ``timeout`` s."""


def env_port(variable: str, default: int) -> int:
    """A port from the environment, with an error that names the variable when it is bad."""
    raw = os.environ.get(variable)
    if not raw:
        return default
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        from scheduler.services.errors import ServiceError

        raise ServiceError(f"{variable}={raw!r} is not a TCP port number (1-65535)")
    return port


def classpath(jars: list[Path]) -> str:
    return os.pathsep.join(str(j) for j in jars)
