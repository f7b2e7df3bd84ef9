"""An install without the `scheduler[spark]` extra: `import scheduler` and the CLI work, commands
run, and Spark work is refused with an error that names the extra to install.

pyspark is installed in the test environment, so each test runs in a subprocess whose
`sitecustomize` puts a finder in front of `sys.meta_path` that refuses to import it, as if it were
absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import SCRIPT
from tests.cli.helpers import wait_for

BLOCKER = '''\
import sys


class NoPyspark:
    """Refuses pyspark and its submodules, as an environment without the package would."""

    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoPyspark())
'''

EVERY_MODULE = """\
import importlib, json, pkgutil, sys
import scheduler

failed = {}
for module in pkgutil.walk_packages(scheduler.__path__, "scheduler."):
    try:
        importlib.import_module(module.name)
    except Exception as error:
        failed[module.name] = repr(error)
try:
    import pyspark
    blocked = False
except ImportError:
    blocked = True
loaded = sorted(name for name in sys.modules if name.split(".")[0] == "pyspark")
print(json.dumps({"failed": failed, "loaded": loaded, "blocked": blocked}))
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a process that cannot import pyspark, on an embedded data dir."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    return {
        **os.environ,
        "PYTHONPATH": str(blocker),
        "SCHEDULER_DATA_DIR": str(tmp_path / "data"),
        "SCHEDULER_PARTITIONS": "4",
    }


def scheduler(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *args], env=env, capture_output=True, text=True, timeout=120)


def test_every_module_of_the_package_imports_without_pyspark(env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", EVERY_MODULE], env=env, capture_output=True, text=True, timeout=300
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["blocked"], "the blocker let pyspark in: this test would prove nothing"
    assert result["failed"] == {}
    assert result["loaded"] == []


def test_without_pyspark_the_cli_runs_commands_and_refuses_spark_work_naming_the_extra(
    env: dict[str, str], tmp_path: Path
) -> None:
    assert scheduler(env, "--help").returncode == 0
    spark_task = scheduler(
        env, "enqueue", "report", "--in", "1s", "--data",
        '{"job": "scheduler.examples.clicks.jobs:rollup_day"}',
    )  # fmt: skip
    spark_worker = scheduler(env, "worker", "--executor", "spark")
    example = scheduler(env, "example", "run")
    out = tmp_path / "out.txt"
    command = json.dumps(
        {"executor": "command", "argv": ["/bin/sh", "-c", f"echo {{{{ordering_id}}}} > {out}"]}
    )
    enqueued = scheduler(env, "enqueue", "nightly", "--in", "1s", "--data", command)

    assert spark_task.returncode != 0
    assert "pip install 'scheduler[spark]'" in spark_task.stderr
    assert "scheduler.examples.clicks.jobs:rollup_day" in spark_task.stderr
    assert spark_worker.returncode != 0
    assert "--executor='spark'" in spark_worker.stderr
    assert "pip install 'scheduler[spark]'" in spark_worker.stderr
    assert example.returncode != 0
    assert "the example pipeline (PySpark jobs) needs pyspark" in example.stderr
    assert enqueued.returncode == 0, enqueued.stderr

    worker = subprocess.Popen(
        [SCRIPT, "worker"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        assert wait_for(lambda: out.exists() and out.read_text() == "nightly\n", timeout=60)
    finally:
        worker.terminate()
        output = worker.communicate(timeout=60)[0].decode()
    assert worker.returncode == 0, output
    listed = scheduler(env, "tasks", "list", "--json")
    assert [row["state"] for row in json.loads(listed.stdout)] == ["succeeded"], listed.stderr
