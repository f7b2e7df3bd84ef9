"""Resolve a server's runtime jars from Maven Central with the system `mvn`.

Each server gets its own throwaway POM and its own lib directory: Kafka logs through log4j2 and
Cassandra through logback, and their netty/jackson/guava versions differ, so one shared classpath
would break at least one of them.  The lib directory is cached under the state dir and marked
complete with a stamp file, so a second `up` never runs Maven again.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from scheduler.services.errors import ServiceError

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by scheduler.services.maven; only used to resolve {name}'s runtime jars. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>scheduler.services</groupId>
  <artifactId>{name}-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

_DEPENDENCY = """    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>"""

# Pinned so the resolution is reproducible; newer versions only need a new pin here.
_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# Debian's mvn prints colour resets even in batch mode; they would garble our error message.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Artifact:
    """One Maven coordinate to resolve, with its transitive runtime dependencies."""

    group: str
    """Maven groupId, e.g. ``org.apache.kafka``."""
    artifact: str
    """Maven artifactId, e.g. ``kafka_2.13``."""
    version: str
    """Exact version; ranges would make the cache stamp meaningless."""

    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def resolve(name: str, artifacts: list[Artifact], cache_dir: Path) -> list[Path]:
    """Return the jars of ``artifacts`` (sorted), resolving them with Maven on the first call.

    ``cache_dir/<name>`` holds the POM, the ``lib/`` directory and a stamp naming the
    coordinates; a changed coordinate list re-resolves into a fresh ``lib/``.
    """
    home = cache_dir / name
    lib = home / "lib"
    stamp = home / "resolved.txt"
    if is_resolved(name, artifacts, cache_dir):
        return sorted(lib.glob("*.jar"))

    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServiceError(
            f"cannot fetch {name}: `mvn` is not on PATH. Install Maven 3.8+ "
            "(e.g. `apt-get install maven`) or point the tests at an existing server "
            "with SCHEDULER_KAFKA_BOOTSTRAP / SCHEDULER_CASSANDRA_HOSTS."
        )
    home.mkdir(parents=True, exist_ok=True)
    if lib.exists():
        shutil.rmtree(lib)  # a half-copied or outdated lib dir must not mix versions
    stamp.unlink(missing_ok=True)
    deps = "\n".join(
        _DEPENDENCY.format(group=a.group, artifact=a.artifact, version=a.version) for a in artifacts
    )
    pom = home / "pom.xml"
    pom.write_text(_POM.format(name=name, dependencies=deps))
    cmd = [
        mvn,
        "-B",
        "-q",
        "-Dstyle.color=never",  # plain text for the error message below
        "-f",
        str(pom),
        f"{_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={lib}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        output = _ANSI.sub("", proc.stdout + proc.stderr).strip()
        lines = [line for line in output.splitlines() if line.strip() not in ("", "[ERROR]")]
        tail = "\n".join(lines[-30:])
        raise ServiceError(
            f"Maven could not resolve {name} ({', '.join(a.coordinate() for a in artifacts)}).\n"
            f"Command: {' '.join(cmd)}\n{tail}\n"
            "Check network access to Maven Central (or your ~/.m2/settings.xml mirror) and "
            "run the command above by hand to see the full output."
        )
    jars = sorted(lib.glob("*.jar"))
    if not jars:
        raise ServiceError(f"Maven resolved {name} but copied no jars into {lib}")
    stamp.write_text(_wanted(artifacts))
    return jars


def is_resolved(name: str, artifacts: list[Artifact], cache_dir: Path) -> bool:
    """Whether `resolve` would answer from the cache, without running Maven."""
    home = cache_dir / name
    stamp = home / "resolved.txt"
    return (
        stamp.is_file()
        and stamp.read_text() == _wanted(artifacts)
        and any((home / "lib").glob("*.jar"))
    )


def _wanted(artifacts: list[Artifact]) -> str:
    """The stamp's text: the coordinates the lib directory was resolved for."""
    return "\n".join(a.coordinate() for a in artifacts) + "\n"
