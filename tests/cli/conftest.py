"""Fixtures for CLI tests: a clean `SCHEDULER_*` environment and an embedded data dir.

Most tests drive `scheduler.cli.main:cli` with click's CliRunner (fast, same process); the ones
that matter end to end run the installed console script in a subprocess, exactly as users do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from scheduler.cli.main import cli
from scheduler.config import CONFIG_ENV
from scheduler.settings import Settings, env_name

SERVER_VARIABLES = ("SCHEDULER_KAFKA_BOOTSTRAP", "SCHEDULER_CASSANDRA_HOSTS")
_SERVERS_FROM_SHELL = {name: os.environ[name] for name in SERVER_VARIABLES if name in os.environ}
"""Existing servers named by the shell; `clean_environment` hides them from the CLI under test."""

SCRIPT = shutil.which("scheduler", path=str(Path(sys.executable).parent)) or "scheduler"
"""The console script installed beside this interpreter (the venv's `scheduler`)."""


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No setting leaks in from the developer's shell or CI (SCHEDULER_KAFKA_BOOTSTRAP...).

    Other `SCHEDULER_*` variables (the launcher's `SCHEDULER_SERVICES_*`) stay: the server
    fixtures need them.
    """
    settings = {env_name(name) for name in Settings.model_fields} | {CONFIG_ENV}
    for name in list(os.environ):
        if name.upper() in settings:
            monkeypatch.delenv(name)


@pytest.fixture
def embedded(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An embedded data dir with 4 partitions and the no-op executor, set in the environment."""
    monkeypatch.setenv("SCHEDULER_DATA_DIR", str(data_dir))
    monkeypatch.setenv("SCHEDULER_PARTITIONS", "4")
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "noop")
    return data_dir


@pytest.fixture
def run() -> Callable[..., Result]:
    """Invoke the CLI in-process: `run("tasks", "list")`."""

    def invoke(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)

    return invoke


@pytest.fixture
def script() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the installed `scheduler` console script with the current environment."""

    def execute(
        *args: str, timeout: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SCRIPT, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            input=input,
        )

    return execute


@pytest.fixture
def worker() -> Iterator[Callable[[], subprocess.Popen[str]]]:
    """Start `scheduler worker` subprocesses (with the environment the test set up); each is
    stopped with SIGTERM at the end."""
    started: list[subprocess.Popen[str]] = []

    def start() -> subprocess.Popen[str]:
        # Its pipes are read only once it stopped: a line per finished task (INFO) would fill
        # them (64 KiB, some 400 tasks) and block the worker in its next log line.
        env = {"SCHEDULER_TASK_LOG_LEVEL": "WARNING", **os.environ}
        process = subprocess.Popen(
            [SCRIPT, "worker"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def kafka_with_sqlite(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Settings for the real Kafka (see tests/servers.py) and a SQLite store, fresh names: for
    tests about Kafka alone, which need no Cassandra node (nor its marker)."""
    from uuid import uuid4

    for name, value in _SERVERS_FROM_SHELL.items():
        monkeypatch.setenv(name, value)
    from tests.servers import kafka_bootstrap

    suffix = uuid4().hex[:10]
    values = {
        "SCHEDULER_LOG": "kafka",
        "SCHEDULER_STORE": "sqlite",
        "SCHEDULER_KAFKA_BOOTSTRAP": kafka_bootstrap(),
        "SCHEDULER_TOPIC": f"cli-{suffix}",
        "SCHEDULER_GROUP_ID": f"cli-workers-{suffix}",
        "SCHEDULER_PARTITIONS": "4",
        "SCHEDULER_EXECUTOR": "noop",
        "SCHEDULER_DATA_DIR": str(tmp_path / "data"),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def distributed(
    kafka_with_sqlite: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> dict[str, str]:
    """Settings for Kafka and Cassandra (real servers, see tests/servers.py), fresh names; the
    keyspace is dropped at the end of the session unless kept (`_drop_keyspaces`)."""
    from tests.servers import cassandra_contact

    hosts, port = cassandra_contact()
    suffix = kafka_with_sqlite["SCHEDULER_TOPIC"].removeprefix("cli-")
    values = {
        **kafka_with_sqlite,
        "SCHEDULER_STORE": "cassandra",
        "SCHEDULER_CASSANDRA_HOSTS": ",".join(hosts),
        "SCHEDULER_CASSANDRA_PORT": str(port),
        "SCHEDULER_CASSANDRA_KEYSPACE": f"cli_{suffix}",
        "SCHEDULER_CASSANDRA_CONSISTENCY": "ONE",
        # No ordering-id indexes (on Cassandra 5.0 two per keyspace, seconds to make and
        # drop: docs/cassandra.md, "What the index costs"); an ordering id is then listed
        # span by span, the path these tests cover (the contracts cover the index's).
        "SCHEDULER_CASSANDRA_ORDERING_INDEX": "false",
        "SCHEDULER_DATA_DIR": str(tmp_path / "unused"),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    _KEYSPACES.append((hosts, port, values["SCHEDULER_CASSANDRA_KEYSPACE"]))
    return values


_KEYSPACES: list[tuple[list[str], int, str]] = []
"""The `distributed` keyspaces of this session: node, port, name."""


KEEP_KEYSPACES_ENV = "KEEP_CLI_TEST_KEYSPACES"
"""Set to 1, the session's `distributed` keyspaces are left on the node. scripts/test.sh sets it
under CI=true when it started the servers itself: it stops them after this session and no later
phase uses them, so the drops (0.4-5 s each, some 40 s a session) would only cost time. The
keyspaces stay in the node's data dir (`.services/`), which CI's clean clone throws away; a
checkout that runs `CI=true scripts/test.sh` again keeps each run's keyspaces. No `SCHEDULER_`
prefix: the CLI warns of every such variable that is no setting, in output these tests read."""


@pytest.fixture(scope="session", autouse=True)
def _drop_keyspaces() -> Iterator[None]:
    """Drop the session's `distributed` keyspaces at its end, when no worker of a test runs on
    them any more. Left behind, 302 of them (3,480 tables) filled the shared node's 2 GB heap,
    and its full collections of 1 to 34 s stalled every bench and test that used it
    (docs/benchmarks.md, "the firing lag on Kafka + Cassandra"). Not with
    `KEEP_CLI_TEST_KEYSPACES=1` (`KEEP_KEYSPACES_ENV`): a node used by no later session."""
    yield
    if os.environ.get(KEEP_KEYSPACES_ENV) == "1":
        _KEYSPACES.clear()
        return
    import warnings

    from scheduler.stores.cassandra import CassandraTaskStore

    droppers: dict[tuple[tuple[str, ...], int], CassandraTaskStore] = {}
    try:
        while _KEYSPACES:
            hosts, port, keyspace = _KEYSPACES.pop()
            node = (tuple(hosts), port)
            if node not in droppers:
                droppers[node] = CassandraTaskStore(hosts=hosts, port=port, keyspace=keyspace)
            dropper = droppers[node]  # one connection per node, reused for each keyspace
            dropper.keyspace = keyspace
            dropper.drop_keyspace()  # IF EXISTS: a test may never have made it
    except Exception as error:  # a cleanup, not a test: say it and leave the rest behind
        warnings.warn(f"could not drop the CLI tests' keyspaces: {error}", stacklevel=1)
    finally:
        for dropper in droppers.values():
            dropper.close()
