"""scripts/setup.sh: quiet when it works (one line: what is ready, what to run next), the whole
output when a step fails, and Java required only by the callers that need it (--java)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "scripts" / "setup.sh"
TOOLS = ("bash", "cat", "cut", "dirname", "head", "mktemp", "rm", "sed", "sha1sum", "touch")
"""What setup.sh runs besides Python and Java."""


def run_setup(
    *args: str, path: str, cwd: Path = ROOT, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=path, PYTHON=python)
    return subprocess.run(
        ["bash", str(cwd / "scripts" / "setup.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def tools_without_java(directory: Path) -> str:
    """A PATH with the tools setup.sh needs and no java."""
    directory.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is not installed"
        (directory / tool).symlink_to(found)
    return str(directory)


def fake_java(directory: Path, version: str) -> Path:
    directory.mkdir()
    java = directory / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2019-01-15' >&2\n")
    java.chmod(0o755)
    return java


def test_an_installed_venv_is_reported_in_one_line_with_what_to_run_next() -> None:
    done = run_setup(path=os.environ["PATH"])

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    # A first run (changed pyproject.toml) also says it installs; nothing else is printed.
    assert lines[:-1] in (
        [],
        ["setup: installing the project into .venv (a minute or more the first time)..."],
    )
    assert lines[-1].startswith("setup: ready: .venv has scheduler ")
    assert "with the spark, dev and bench extras" in lines[-1]
    assert lines[-1].endswith(
        "next: bash scripts/example.sh (the example pipeline) or .venv/bin/scheduler --help"
    )


def test_without_java_setup_succeeds_and_says_only_spark_and_the_servers_need_it(
    tmp_path: Path,
) -> None:
    done = run_setup("--next", "running the tests", path=tools_without_java(tmp_path / "bin"))

    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert "no Java (only Spark and the local Kafka/Cassandra servers need it)" in last
    assert last.endswith("next: running the tests")


def test_a_caller_that_needs_java_is_stopped_before_installing_when_it_is_missing(
    tmp_path: Path,
) -> None:
    done = run_setup("--java", "the example runs Spark", path=tools_without_java(tmp_path / "bin"))

    assert done.returncode == 2
    assert done.stdout == ""
    assert (
        "error: the example runs Spark, which needs Java 17 or newer; found no java" in done.stderr
    )
    assert "openjdk-17-jre-headless" in done.stderr


def test_a_java_older_than_17_is_named_with_its_path(tmp_path: Path) -> None:
    java = fake_java(tmp_path / "old", "11.0.2")
    path = f"{java.parent}{os.pathsep}{tools_without_java(tmp_path / 'bin')}"

    refused = run_setup("--java", "the tests run Spark", path=path)
    reported = run_setup(path=path)

    assert refused.returncode == 2
    assert f"found only Java 11 at {java}" in refused.stderr
    assert reported.returncode == 0, reported.stderr
    assert f"Java 11 at {java} (Spark and the local servers need 17)" in reported.stdout


def test_a_failing_step_prints_its_whole_output_and_the_log_file(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(SETUP, tmp_path / "scripts" / "setup.sh")
    python = tmp_path / "python3"
    # Passes the version check, then fails to create the venv with output of its own.
    python.write_text(
        '#!/bin/sh\n[ "$1" = -c ] && exit 0\necho "venv: no space left on device (details)"\n'
        "exit 1\n"
    )
    python.chmod(0o755)

    done = run_setup(path=os.environ["PATH"], cwd=tmp_path, python=str(python))

    assert done.returncode == 1
    assert "error: creating .venv with" in done.stderr
    assert "venv: no space left on device (details)" in done.stderr
    log = done.stderr.rsplit(" in ", 1)[-1].strip()
    assert Path(log).read_text() == "venv: no space left on device (details)\n"
    Path(log).unlink()


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("example.sh", "the example pipeline runs PySpark jobs"),
        ("test.sh", "the test suite runs Spark jobs and starts Kafka and Cassandra servers"),
    ],
)
def test_the_readme_commands_say_they_need_java_before_doing_anything_without_it(
    script: str, reason: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=tools_without_java(tmp_path / "bin"), PYTHON=sys.executable)

    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"error: {reason}")
    assert "needs Java 17 or newer; found no java" in done.stderr
