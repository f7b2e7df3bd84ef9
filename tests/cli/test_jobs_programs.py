"""Batch jobs whose action is a registered PySpark job (`spark_job`) or a declared program (of
kind command and of kind spark), end to end: the jobs file -> a worker with batch_file (its one
local SparkSession, on the product's defaults) -> each partition a run in `scheduler runs` and
a state in `scheduler jobs`, failures handled by each job's policy (retry until it succeeds,
retry until the attempt limit, mark success); on the embedded backend and on Kafka + Cassandra.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from scheduler.errors import BackendUnavailableError
from tests.batch.helpers import seed_config, seed_job
from tests.cli.helpers import wait_for

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
END = "2000-01-01 02:00:00"
SPARK_JOBS = "tests.batch.spark_jobs"


def _programs(out: Path) -> str:
    write = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
        "p.parent.mkdir(parents=True, exist_ok=True); p.write_text(sys.argv[2])"
    )
    argv = [PY, "-c", write, "{{out}}/{{partition}}.txt", "{{partition}}"]
    return f"""
[programs.write-partition]
kind = "command"
argv = {json.dumps(argv)}

[programs.exit-3]
kind = "command"
argv = [{json.dumps(PY)}, "-c", "import sys; sys.exit(3)"]

[programs.spark-write]
kind = "spark"
job = "{SPARK_JOBS}:write_partition"
"""


def _jobs(out: Path) -> dict[str, Any]:
    def job(name: str, **fields: Any) -> dict[str, Any]:
        fields.setdefault("arguments", {"out": str(out / name)})
        fields.setdefault("end_partition", END)
        entry = seed_job(name, **fields)
        for unused in ("command", "stdout_path", "stderr_path"):
            entry.pop(unused)
        return entry

    return seed_config(
        job("spark-job", spark_job=f"{SPARK_JOBS}:write_partition"),
        job(
            "spark-retry",
            spark_job=f"{SPARK_JOBS}:fail_first",
            retry_delay="2 seconds",
            max_attempts=3,
        ),
        job(
            "spark-gives-up",
            spark_job=f"{SPARK_JOBS}:always_fails",
            end_partition="2000-01-01 01:00:00",
            retry_delay="1 seconds",
            max_attempts=2,
        ),
        job(
            "program-command",
            program="write-partition",
            dependencies=[{"name": "spark-job", "shift": "0 hours"}],
        ),
        job("program-spark", program="spark-write"),
        job("program-fails", program="exit-3", on_failure="mark_success"),
    )


@pytest.fixture(params=["embedded", pytest.param("distributed", marks=[
    pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow])])  # fmt: skip
def deployment(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The backend's settings in the environment, a jobs file and a programs file; the
    directory the jobs write to."""
    request.getfixturevalue(request.param)
    out = tmp_path / "out"
    programs = tmp_path / "programs.toml"
    programs.write_text(_programs(out))
    file = tmp_path / "jobs.json"
    file.write_text(json.dumps(_jobs(out)))
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")
    monkeypatch.setenv("SCHEDULER_BATCH_FILE", str(file))
    monkeypatch.setenv("SCHEDULER_BATCH_POLL_S", "1")
    monkeypatch.setenv("SCHEDULER_PROGRAMS_FILE", str(programs))
    monkeypatch.setenv("SCHEDULER_SPARK_JOB_MODULES", f"scheduler.examples,{SPARK_JOBS}")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    _make_deployment()
    return out


def _make_deployment() -> None:
    """The topic and every table first, as a deployment makes them: a worker and a command
    creating the same Cassandra tables at once can leave the command holding a table id
    Cassandra dropped ("Unknown CF")."""
    from scheduler.batch.runtime import open_batch_store
    from scheduler.config import load_settings
    from scheduler.programs.runtime import open_run_store
    from scheduler.runtime import connect, open_store

    settings = load_settings()
    connect(settings).close()
    store = open_store(settings, create_schema=True)
    try:
        open_run_store(settings, store, create_schema=True).close()
        open_batch_store(settings, store, create_schema=True).close()
    finally:
        store.close()


def _listed(run) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    """The jobs by name; none while the worker has not loaded the file, or while a loaded
    Cassandra node times the command's requests out (the next poll asks again)."""
    from cassandra import OperationTimedOut

    try:
        said = run("jobs", "list", "--json")
    except (OperationTimedOut, BackendUnavailableError):
        return {}
    return {row["name"]: row for row in json.loads(said.output)} if said.exit_code == 0 else {}


def _settled(run) -> bool:  # type: ignore[no-untyped-def]
    rows = _listed(run)
    if len(rows) != 6 or any(row["running"] for row in rows.values()):
        return False
    done = {name: row["succeeded"] + row["marked_success"] for name, row in rows.items()}
    return done == {
        "spark-job": 2, "spark-retry": 2, "spark-gives-up": 0, "program-command": 2,
        "program-spark": 2, "program-fails": 2,
    } and rows["spark-gives-up"]["failed"] == 1  # fmt: skip


def _partitions(run, job: str, *flags: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    said = run("jobs", "partitions", job, "--json", *flags)
    assert said.exit_code == 0, said.output
    return dict(json.loads(said.output))


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_spark_jobs_and_programs_run_as_partitions_with_each_jobs_failure_policy(
    deployment: Path, run, worker
) -> None:
    worker()
    assert wait_for(lambda: _settled(run), timeout=780), _listed(run)
    out = deployment

    # Every partition's action ran once and wrote what it was given.
    for job in ("spark-job", "spark-retry", "program-spark"):
        written = {p.name: p.read_text() for p in (out / job).glob("*.txt")}
        assert written == {"2000-01-01 00:00:00.txt": "3", "2000-01-01 01:00:00.txt": "3"}, job
    command = {p.name: p.read_text() for p in (out / "program-command").glob("*.txt")}
    assert command["2000-01-01 01:00:00.txt"] == "2000-01-01 01:00:00" and len(command) == 2

    # Failures, per policy: a retry that succeeds, an attempt limit reached, a marked success.
    retried = _partitions(run, "spark-retry", "--history")
    assert [p["status"] for p in retried["partitions"]] == ["SUCCEEDED", "SUCCEEDED"]
    attempts = sorted((a["partition"], a["attempt"], a["status"]) for a in retried["history"])
    assert [(n, s) for _, n, s in attempts] == [
        (1, "FAILED"), (2, "SUCCEEDED"), (1, "FAILED"), (2, "SUCCEEDED"),
    ]  # fmt: skip
    reasons = [a["reason"] for a in retried["history"] if a["status"] == "FAILED"]
    assert len(reasons) == 2 and all("fails on purpose" in r for r in reasons), reasons
    given_up = _partitions(run, "spark-gives-up", "--history")
    (partition,) = given_up["partitions"]
    assert partition["status"] == "FAILED" and partition["retry_at"] is None
    assert partition["attempts"] == 2 and "always fails" in partition["reason"]
    assert [a["attempt"] for a in given_up["history"]] == [2, 1]
    marked = _partitions(run, "program-fails", "--history")
    assert [p["status"] for p in marked["partitions"]] == ["MARKED_SUCCESS"] * 2
    assert {a["status"] for a in marked["history"]} == {"MARKED_SUCCESS"}

    # Each attempt is a run of its program, started by its batch job.
    runs = json.loads(run("runs", "list", "--limit", "100", "--json").output)
    by_job: dict[str, list[tuple[str, str]]] = {}
    for found in runs:
        by_job.setdefault(found["started_by"], []).append((found["program"], found["status"]))
    assert sorted(by_job["batch-job:spark-job"]) == [("batch-spark", "COMPLETED")] * 2
    assert (
        sorted(by_job["batch-job:spark-retry"])
        == [("batch-spark", "COMPLETED")] * 2 + [("batch-spark", "FAILED")] * 2
    )
    assert by_job["batch-job:spark-gives-up"] == [("batch-spark", "FAILED")] * 2
    assert by_job["batch-job:program-command"] == [("write-partition", "COMPLETED")] * 2
    assert by_job["batch-job:program-spark"] == [("spark-write", "COMPLETED")] * 2
    assert by_job["batch-job:program-fails"] == [("exit-3", "FAILED")] * 2
    assert len(runs) == 14
