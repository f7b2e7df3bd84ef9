"""The Java driver of `scheduler bench peer` (db-scheduler and Quartz): built once with Maven.

Its sources are scheduler/bench/java (a pom and one class); the build lands in a cache directory
named by a hash of those sources (`$SCHEDULER_BENCH_CACHE`, else ~/.cache/scheduler-bench), so a
second run, or CI with that directory cached, starts the JVM without running Maven again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCES = Path(__file__).parent / "java"
CACHE_ENV = "SCHEDULER_BENCH_CACHE"


class Unavailable(RuntimeError):
    """A peer's server or toolchain is missing here: the side is skipped with this reason."""


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted([SOURCES / "pom.xml", *(SOURCES / "src").rglob("*.java")]):
        digest.update(str(path.relative_to(SOURCES)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "scheduler-bench")


def classpath() -> str:
    """The driver's classpath, building it first if this source hash has no build yet."""
    target = cache_root() / f"java-driver-{source_hash()}"
    jar = target / "peer-driver-1.jar"
    if not jar.exists():
        _build(target)
    return os.pathsep.join([str(jar), str(target / "lib" / "*")])


def _build(target: Path) -> None:
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            raise Unavailable(f"{tool} is not on PATH: install Maven and Java 17 to run this side")
    with tempfile.TemporaryDirectory(prefix="peer-driver-") as work:
        build = Path(work) / "java"
        shutil.copytree(SOURCES, build, ignore=shutil.ignore_patterns("target"))
        done = subprocess.run(
            ["mvn", "-q", "-B", "package", "-DskipTests"],
            cwd=build,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            raise Unavailable(f"mvn package failed: {(done.stdout + done.stderr)[-800:]}")
        staging = target.with_name(target.name + f".tmp{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        shutil.copy2(build / "target" / "peer-driver-1.jar", staging)
        shutil.copytree(build / "target" / "lib", staging / "lib")
        try:
            staging.rename(target)
        except OSError:  # another process built it first
            shutil.rmtree(staging, ignore_errors=True)


def command(system: str, mode: str, **options: object) -> list[str]:
    """`java -cp ... bench.Driver SYSTEM MODE key=value...`."""
    return [
        "java",
        "-Xmx1g",
        "-cp",
        classpath(),
        "bench.Driver",
        system,
        mode,
        *(f"{key}={value}" for key, value in options.items()),
    ]
