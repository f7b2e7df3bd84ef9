"""A deployment whose worker runs programs (the `auto` executor): it applies schedule changes and
runs batch jobs. Shared by the schedules and batch-job API tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scheduler.fleet import WorkerProcess
from scheduler.runtime import connect
from scheduler.settings import Settings
from tests.api.conftest import ROOT, WORKER_ENV
from tests.api.server import ApiServer


def programs_settings(data_dir: Path) -> Settings:
    return Settings(
        log="embedded",
        store="sqlite",
        data_dir=data_dir,
        partitions=4,
        executor="auto",
        programs_file=data_dir.parent / "programs.toml",
    )


@contextmanager
def programs_deployment(
    data_dir: Path, programs: str, name: str, **env: str
) -> Iterator[ApiServer]:
    """The API served over `data_dir`, whose worker runs the programs of the TOML `programs`
    (with `env` added to its environment)."""
    (data_dir.parent / "programs.toml").write_text(programs)
    settings = programs_settings(data_dir)
    connect(settings).close()
    env = {
        **WORKER_ENV,
        **env,
        "SCHEDULER_EXECUTOR": "auto",
        "SCHEDULER_PROGRAMS_FILE": str(data_dir.parent / "programs.toml"),
        "SCHEDULER_DATA_DIR": str(data_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    worker = WorkerProcess(env, name=name, log_path=data_dir.parent / "worker.log")
    try:
        worker.wait_until_owning(60, at_least=4)
        api = ApiServer(settings, data_dir.parent / "tokens.json").start()
        try:
            yield api
        finally:
            api.stop()
    finally:
        worker.stop()
