"""The batch endpoints of an API served beside a fleet: the API's process runs no batch jobs, it
reads them from the store (and, until a worker applied it, from the jobs file it is given), on
the embedded backend and on Kafka + Cassandra."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler.api.auth import Role
from scheduler.fleet import WorkerProcess
from scheduler.runtime import connect
from scheduler.settings import Settings
from tests.api.conftest import ROOT, wait_for
from tests.api.server import ApiServer
from tests.batch.helpers import seed_config, seed_job

Call = Callable[..., httpx.Response]
END = "2000-01-01 02:00:00"


def _file(directory: Path) -> Path:
    upstream = seed_job("upstream", command=[sys.executable, "-c", "pass"], end_partition=END)
    downstream = seed_job(
        "downstream",
        command=[sys.executable, "-c", "pass"],
        end_partition=END,
        dependencies=[{"name": "upstream", "shift": "0 hours"}],
    )
    file = directory / "jobs.json"
    file.write_text(json.dumps(seed_config(upstream, downstream)))
    return file


def _environment(backend: str, directory: Path) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:10]
    env = {
        "SCHEDULER_PARTITIONS": "4",
        "SCHEDULER_DATA_DIR": str(directory / "data"),
        "SCHEDULER_TOPIC": f"api-batch-{suffix}",
        "SCHEDULER_GROUP_ID": f"api-batch-{suffix}",
    }
    if backend == "embedded":
        return env | {"SCHEDULER_LOG": "embedded", "SCHEDULER_STORE": "sqlite"}
    from tests.servers import cassandra_contact, kafka_bootstrap

    hosts, port = cassandra_contact()
    return env | {
        "SCHEDULER_LOG": "kafka",
        "SCHEDULER_STORE": "cassandra",
        "SCHEDULER_KAFKA_BOOTSTRAP": kafka_bootstrap(),
        "SCHEDULER_CASSANDRA_HOSTS": ",".join(hosts),
        "SCHEDULER_CASSANDRA_PORT": str(port),
        "SCHEDULER_CASSANDRA_KEYSPACE": f"api_batch_{suffix}",
        "SCHEDULER_CASSANDRA_CONSISTENCY": "ONE",
    }


def _settings(env: dict[str, str], file: Path) -> Settings:
    values: dict[str, Any] = {
        key.removeprefix("SCHEDULER_").lower(): value for key, value in env.items()
    }
    return Settings(**values, batch_file=file)


@pytest.fixture(
    scope="module",
    params=[
        "embedded",
        pytest.param("distributed", marks=[pytest.mark.kafka, pytest.mark.cassandra]),
    ],
)
def fleet(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The jobs file, the deployment's settings (the file among them) and its environment;
    no worker runs yet. The topic, keyspace and tables exist, as a deployment makes them."""
    directory = tmp_path_factory.mktemp("fleet")
    file = _file(directory)
    env = _environment(request.param, directory)
    settings = _settings(env, file)
    connect(settings).close()
    from scheduler.batch.runtime import open_batch_store
    from scheduler.runtime import open_store

    store = open_store(settings, create_schema=True)
    open_batch_store(settings, store, create_schema=True).close()
    try:
        yield {"file": file, "settings": settings, "env": env, "directory": directory}
    finally:
        if request.param == "distributed":
            store.drop_keyspace()  # type: ignore[attr-defined]
        store.close()


@pytest.fixture(scope="module")
def server(fleet: dict[str, Any]) -> Iterator[ApiServer]:
    api = ApiServer(fleet["settings"], fleet["directory"] / "tokens.json").start()
    try:
        yield api
    finally:
        api.stop()


def _jobs(as_role: Call) -> dict[str, dict[str, Any]]:
    answer = as_role(Role.READ, "GET", "/api/v1/batch/jobs")
    assert answer.status_code == 200, answer.text
    return {job["name"]: job for job in answer.json()}


def _statuses(as_role: Call, job: str) -> list[str]:
    answer = as_role(Role.READ, "GET", f"/api/v1/batch/jobs/{job}/partitions")
    assert answer.status_code == 200, answer.text
    return [p["status"] for p in answer.json()]


def test_the_file_shows_before_any_worker_applied_it_and_changes_wait_for_it(
    as_role: Call, fleet: dict[str, Any]
) -> None:
    configuration = as_role(Role.READ, "GET", "/api/v1/batch/configuration").json()
    assert configuration["source"] == f"{fleet['file']} (not applied yet)"
    assert configuration["text"] == fleet["file"].read_text()
    jobs = _jobs(as_role)
    assert [jobs["upstream"]["total"], jobs["upstream"]["succeeded"]] == [2, 0]
    assert _statuses(as_role, "upstream") == ["RUNNABLE", "RUNNABLE"]
    assert _statuses(as_role, "downstream") == ["WAITING_DEPENDENCIES"] * 2
    refused = as_role(Role.OPERATE, "POST", "/api/v1/batch/jobs/upstream/pause")
    assert refused.status_code == 404
    assert "is not in force yet" in refused.json()["message"]


def test_the_runs_of_a_worker_with_the_file_show_in_the_api(
    as_role: Call, fleet: dict[str, Any]
) -> None:
    env = {
        **fleet["env"],
        "SCHEDULER_EXECUTOR": "auto",
        "SCHEDULER_BATCH_FILE": str(fleet["file"]),
        "SCHEDULER_BATCH_POLL_S": "1",
        "SCHEDULER_TASK_LOG_LEVEL": "WARNING",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    worker = WorkerProcess(env, name="api-batch-worker", log_path=fleet["directory"] / "w.log")
    try:
        wait_for(
            lambda: [j["succeeded"] for j in _jobs(as_role).values()] == [2, 2],
            timeout=180,
            what="both jobs' partitions to succeed",
        )
    finally:
        worker.stop()
    assert not fleet["file"].exists()  # applied and renamed: the store is read now
    configuration = as_role(Role.READ, "GET", "/api/v1/batch/configuration").json()
    assert configuration["source"] == str(fleet["file"])
    assert _statuses(as_role, "downstream") == ["SUCCEEDED", "SUCCEEDED"]
    runs = as_role(Role.READ, "GET", "/api/v1/runs").json()["runs"]
    assert (
        sorted(r["started_by"] for r in runs)
        == ["batch-job:downstream"] * 2 + ["batch-job:upstream"] * 2
    )
