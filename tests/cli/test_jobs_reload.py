"""Hot reload of the batch file under a worker, on the embedded backend and on Kafka +
Cassandra: a valid file is applied while a run is in progress and leaves it running; an invalid
one is logged and left in place, the last good configuration staying in force, and a worker
restarted without the file runs from the stored one."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.batch.helpers import seed_config, seed_job
from tests.cli.helpers import wait_for
from tests.cli.test_jobs import listed

PY = sys.executable
ONE_HOUR = {"end_partition": "2000-01-01 01:00:00"}


@pytest.fixture(params=["embedded", pytest.param("distributed", marks=[
    pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow])])  # fmt: skip
def file(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    request.getfixturevalue(request.param)
    file = tmp_path / "jobs.json"
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")
    monkeypatch.setenv("SCHEDULER_BATCH_FILE", str(file))
    monkeypatch.setenv("SCHEDULER_BATCH_POLL_S", "1")
    return file


def write(file: Path, *jobs: dict[str, Any]) -> None:
    """Whole or not at all, as an operator's editor saves it; polled every second."""
    text = json.dumps(seed_config(*jobs) | {"new_configuration_polling_time": "1 seconds"})
    partial = file.with_name(file.name + ".partial")
    partial.write_text(text)
    partial.replace(file)


def test_a_reload_leaves_the_run_in_progress_running_and_an_invalid_file_keeps_the_last_good(
    file: Path, run: Callable[..., Any], worker: Callable[[], Any], tmp_path: Path
) -> None:
    flag = tmp_path / "go"
    waits = f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.05)"
    slow = seed_job("slow", command=[PY, "-c", waits], **ONE_HOUR)
    write(file, slow)
    process = worker()
    assert wait_for(lambda: listed(run).get("slow", {}).get("running") == 1, timeout=120)

    write(file, slow | {"retry_delay": "1 hours"}, seed_job("extra", **ONE_HOUR))
    assert wait_for(lambda: listed(run).get("extra", {}).get("succeeded") == 1, timeout=60)
    assert listed(run)["slow"]["running"] == 1  # the reload did not touch it
    assert Path(f"{file}_IMPORTED").exists() and not file.exists()

    file.write_text('{"max_parallelism": 1, "jobs": [{"name": "broken"}]}')
    flag.touch()  # the run's end is a task of the queue: it looks at the changed file
    assert wait_for(lambda: listed(run).get("slow", {}).get("succeeded") == 1, timeout=60)
    process.terminate()
    _, err = process.communicate(timeout=30)

    assert "is not valid; the last good one stays in force" in err
    assert "broken" in file.read_text()  # left in place for the operator to fix
    assert sorted(listed(run)) == ["extra", "slow"]
    assert attempts(run) == [(1, "SUCCEEDED")]  # the reload did not restart it
    runs = json.loads(run("runs", "list", "--json").output)
    assert sorted(r["started_by"] for r in runs) == ["batch-job:extra", "batch-job:slow"]

    # A restart needs no file: the last good configuration is the store's.
    file.unlink()
    worker()
    said = run("jobs", "rerun", "slow", "--from", "2000-01-01 00:00:00", "--to",
               "2000-01-01 01:00:00")  # fmt: skip
    assert said.exit_code == 0, said.output
    assert wait_for(lambda: attempts(run) == [(2, "SUCCEEDED"), (1, "SUCCEEDED")], timeout=120)
    assert sorted(listed(run)) == ["extra", "slow"]


def attempts(run: Callable[..., Any], job: str = "slow") -> list[tuple[int, str]]:
    history = json.loads(run("jobs", "partitions", job, "--history", "--json").output)
    return [(a["attempt"], a["status"]) for a in history["history"]]


def test_a_command_that_cannot_start_fails_its_partition_with_the_reason_in_its_stderr_file(
    file: Path, run: Callable[..., Any], worker: Callable[[], Any], tmp_path: Path
) -> None:
    err = tmp_path / "out" / "err [[partition]].txt"
    missing = seed_job(
        "missing",
        command=[str(tmp_path / "no-such-program"), "[[partition]]"],
        retry_delay="1 days",
        stdout_path=str(tmp_path / "out" / "out.txt"),
        stderr_path=str(err),
        **ONE_HOUR,
    )
    write(file, missing)
    worker()

    def failed() -> list[dict[str, Any]]:
        said = run("jobs", "partitions", "missing", "--status", "FAILED", "--json")
        return json.loads(said.output)["partitions"] if said.exit_code == 0 else []

    partitions = wait_for(failed, timeout=120)
    assert partitions, "the partition did not fail"
    written = (tmp_path / "out" / "err 2000-01-01 00:00:00.txt").read_text()
    assert "cannot start" in written and "no-such-program" in written
    assert "cannot start" in partitions[0]["reason"]
    assert attempts(run, "missing") == [(1, "FAILED")]
