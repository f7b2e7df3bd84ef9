"""Run one of the launcher's servers as a container's main process.

The Kafka and Cassandra images (docker/server.Dockerfile) hold the jars the launcher resolved
on the host and this package; their entry point is ``python3 -m scheduler.services.container
kafka``, which writes the configuration the launcher would write and then becomes the JVM
(``exec``), so the container's lifetime is the server's. Ports and the state dir come from the
same environment variables as the launcher's (``SCHEDULER_SERVICES_KAFKA_PORT``, ...), which is
how a container on the host network is moved off ports that are taken.

``--resolve NAME`` is the host side: resolve the server's jars with Maven (cached as the launcher
caches them) and print the directory that holds them, for scripts/containers.sh to copy into
the image's build context.
"""

from __future__ import annotations

import os
import sys

from scheduler.services.base import ServerPaths
from scheduler.services.launcher import server, state_dir
from scheduler.services.maven import resolve
from scheduler.services.process import require_java17


def run(name: str) -> None:
    """Configure `name` under the state dir and replace this process by its JVM."""
    srv = server(name)
    root = state_dir()
    paths = ServerPaths(root=root / name, cache=root / "cache")
    jars = resolve(srv.distribution, srv.artifacts(), paths.cache)
    java = require_java17()
    paths.make()
    (paths.root / "tmp").mkdir(exist_ok=True)
    srv.configure(java, paths, jars)
    argv = srv.argv(java, paths, jars)
    os.chdir(paths.root)
    sys.stdout.flush()
    os.execv(argv[0], argv)


def resolved_dir(name: str) -> str:
    """Resolve `name`'s jars into the launcher's cache; the cache directory of its
    distribution (``<state dir>/cache/<distribution>``, holding ``lib/`` and the stamp)."""
    srv = server(name)
    cache = state_dir() / "cache"
    resolve(srv.distribution, srv.artifacts(), cache)
    return str(cache / srv.distribution)


def main(args: list[str]) -> int:
    if len(args) == 2 and args[0] == "--resolve":
        print(resolved_dir(args[1]))
        return 0
    if len(args) == 1:
        run(args[0])
    print(
        "usage: python -m scheduler.services.container (kafka|cassandra | --resolve NAME)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
