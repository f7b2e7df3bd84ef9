"""`scheduler jobs` end to end: a worker polls the batch file, runs its partitions as real
commands (runs started by the batch job), and the CLI shows, reruns, pauses and resumes them;
on the embedded backend and on Kafka + Cassandra."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.batch.helpers import seed_config, seed_job
from tests.cli.helpers import wait_for

PY = sys.executable


def test_check_reports_every_problem_with_its_job_and_exits_2(run, tmp_path: Path) -> None:
    bad = seed_config(
        seed_job("a", increment="0 hours"),
        seed_job("a"),
        seed_job("b", dependencies=[{"name": "nobody", "shift": "0 hours"}], command=[]),
    )
    file = tmp_path / "jobs.json"
    file.write_text(json.dumps(bad))
    said = run("jobs", "check", str(file))
    assert said.exit_code == 2
    assert "jobs[0].increment (job 'a')" in said.output
    assert "jobs[1].name (job 'a'): this name is already used" in said.output
    assert "jobs[2].dependencies[0].name (job 'b'): no job is named 'nobody'" in said.output
    assert "jobs[2].command (job 'b')" in said.output
    as_json = run("jobs", "check", str(file), "--json")
    assert as_json.exit_code == 2
    problems = json.loads(as_json.output)["problems"]
    assert {(p["path"], p["job"]) for p in problems} >= {("jobs[1].name", "a")}


def test_check_accepts_the_seed_example(run) -> None:
    seed = Path(__file__).resolve().parents[1] / "batch" / "seed_example.json"
    said = run("jobs", "check", str(seed), "--json")
    assert said.exit_code == 0, said.output
    assert json.loads(said.output) == {"valid": True, "jobs": ["job1", "job2"]}
    assert run("jobs", "check", str(seed)).output == f"{seed}: valid, 2 jobs: job1, job2\n"


def jobs_file(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    one = seed_job(
        "job1",
        command=[PY, "-c", "import sys; print(sys.argv[1])", "[[partition]]"],
        end_partition="2000-01-01 03:00:00",
        stdout_path=str(out / "job1 [[partition]].out"),
        stderr_path=str(out / "job1 [[partition]].err"),
    )
    two = seed_job(
        "job2",
        command=[PY, "-c", "import sys; sys.exit(3)"],
        end_partition="2000-01-01 03:00:00",
        on_failure="mark_success",
        dependencies=[{"name": "job1", "shift": "0 hours"}, {"name": "job1", "shift": "-1 hours"}],
        stdout_path=str(out / "job2.out"),
        stderr_path=str(out / "job2.err"),
    )
    file = tmp_path / "jobs.json"
    file.write_text(json.dumps(seed_config(one, two)))
    return file


def listed(run) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    said = run("jobs", "list", "--json")
    return {row["name"]: row for row in json.loads(said.output)} if said.exit_code == 0 else {}


def settled(run, job1: int, job2: int) -> bool:  # type: ignore[no-untyped-def]
    rows = listed(run)
    return (
        bool(rows)
        and rows["job1"]["succeeded"] == job1
        and rows["job2"]["marked_success"] == job2
        and not rows["job1"]["running"] + rows["job2"]["running"]
    )


@pytest.fixture(params=["embedded", pytest.param("distributed", marks=[
    pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow])])  # fmt: skip
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    request.getfixturevalue(request.param)
    file = jobs_file(tmp_path)
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")
    monkeypatch.setenv("SCHEDULER_BATCH_FILE", str(file))
    monkeypatch.setenv("SCHEDULER_BATCH_POLL_S", "1")
    return file


def test_a_worker_runs_the_polled_file_and_the_cli_shows_reruns_and_pauses(
    backend: Path, run, worker, tmp_path: Path
) -> None:
    worker()
    # The worker made the tables before it read the file: the CLI finds them.
    assert wait_for(lambda: not backend.exists(), timeout=120)
    assert wait_for(lambda: settled(run, 3, 2), timeout=180), listed(run)
    assert not backend.exists() and Path(f"{backend}_IMPORTED").exists()
    out = tmp_path / "out" / "job1 2000-01-01 01:00:00.out"
    assert out.read_text() == "2000-01-01 01:00:00\n"

    partitions = json.loads(run("jobs", "partitions", "job2", "--json").output)["partitions"]
    assert [p["status"] for p in partitions] == [
        "BLOCKED_FOREVER", "MARKED_SUCCESS", "MARKED_SUCCESS",
    ]  # fmt: skip
    assert "before job1's first partition" in partitions[0]["reason"]
    grid = run("jobs", "partitions", "job2")
    assert "BLOCKED_FOREVER: 1  MARKED_SUCCESS: 2" in grid.output
    # A partition marked success failed: the table says so and where the reason is.
    assert grid.output.count("run failed; on_failure marked it done (--history: why)") == 2
    # A failed attempt's reason leads with what failed, not the exception and the task key.
    history = run("jobs", "partitions", "job2", "--history").output
    assert "CommandFailedError: task" not in history and PY[:40] in history
    runs = json.loads(run("runs", "list", "--json").output)
    assert sorted({r["started_by"] for r in runs}) == ["batch-job:job1", "batch-job:job2"]
    assert len(runs) == 5

    assert run("jobs", "pause", "job1").exit_code == 0
    wait_for(lambda: listed(run)["job1"]["paused"], timeout=60)
    rerun = run(
        "jobs", "rerun", "job1", "--from", "2000-01-01 01:00:00", "--to", "2000-01-01 02:00:00",
        "--with-dependants",
    )  # fmt: skip
    assert rerun.exit_code == 0, rerun.output
    assert wait_for(lambda: listed(run)["job1"]["succeeded"] == 2, timeout=60)
    assert len(json.loads(run("runs", "list", "--json").output)) == 5  # paused: nothing ran
    assert run("jobs", "resume", "job1").exit_code == 0
    assert wait_for(lambda: settled(run, 3, 2) and len(json.loads(
        run("runs", "list", "--json").output)) == 8, timeout=120)  # fmt: skip
    history = json.loads(run("jobs", "partitions", "job1", "--history", "--json").output)
    attempts = [(a["partition"], a["attempt"]) for a in history["history"]]
    assert attempts.count((946688400000, 2)) == 1  # 01:00 ran a second time


def test_an_unknown_job_is_refused_with_the_known_ones(backend: Path, run, worker) -> None:
    worker()
    assert wait_for(lambda: not backend.exists(), timeout=120)
    wait_for(lambda: settled(run, 3, 2), timeout=180)
    said = run("jobs", "pause", "nobody")
    assert said.exit_code == 4
    assert "no batch job is named 'nobody'; the jobs are ['job1', 'job2']" in said.output
    # A range that holds no partition, and a date in another shape: bad requests, no traceback.
    backwards = run(
        "jobs", "rerun", "job1", "--from", "2000-01-01 02:00:00", "--to", "2000-01-01 01:00:00"
    )  # fmt: skip
    assert backwards.exit_code == 2, backwards.output
    assert "end 2000-01-01 01:00:00 must be after its start 2000-01-01 02:00:00" in (
        backwards.output
    )
    misdated = run("jobs", "rerun", "job1", "--from", "2000-01-01 02:00", "--to", "2000-01-02")
    assert misdated.exit_code == 2
    assert "Invalid value for '--from': '2000-01-01 02:00' is not a partition date" in (
        misdated.output
    )


def test_jobs_load_waits_until_a_worker_puts_it_in_force(
    embedded: Path, run, worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")
    monkeypatch.setenv("SCHEDULER_BATCH_FILE", str(tmp_path / "not-written-yet.json"))
    file = jobs_file(tmp_path)
    worker()
    assert wait_for(lambda: (embedded / "store.db").exists())
    loaded = run("jobs", "load", str(file))
    assert loaded.exit_code == 0, loaded.output
    assert f"loaded {file} (2 jobs): in force" in loaded.output
    assert sorted(listed(run)) == ["job1", "job2"]  # in force when the command returned
    again = run("jobs", "load", str(file))  # the same text loaded again is waited for too
    assert again.exit_code == 0, again.output


def test_jobs_load_with_no_worker_running_batch_jobs_says_what_to_set_and_exits_3(
    embedded: Path, run, worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scheduler.cli import jobs as jobs_cli

    monkeypatch.setattr(jobs_cli, "LOAD_WAIT_S", 4.0)
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")  # and no batch_file: no batch route
    worker()
    assert wait_for(lambda: (embedded / "store.db").exists())
    said = run("jobs", "load", str(jobs_file(tmp_path)))
    assert said.exit_code == 3, said.output
    # The wait is said after 3 s, so that a user does not take it for a hang.
    assert "no worker has put the batch configuration 'default' in force yet" in said.output
    assert "no worker applied it within 4s" in said.output
    assert "batch_file set (SCHEDULER_BATCH_FILE)" in said.output


def test_jobs_list_counts_the_partitions_not_due_yet(
    embedded: Path, run, worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Partitions whose hour has not passed are in TOTAL and in no other count but NOT DUE, so
    # that the columns add up to the total.
    later = seed_job(
        "later", start_partition="2100-01-01 00:00:00", end_partition="2100-01-01 03:00:00"
    )
    file = tmp_path / "later.json"
    file.write_text(json.dumps(seed_config(later)))
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")
    monkeypatch.setenv("SCHEDULER_BATCH_FILE", str(tmp_path / "not-written-yet.json"))
    worker()
    assert wait_for(lambda: (embedded / "store.db").exists())
    assert run("jobs", "load", str(file)).exit_code == 0
    header, row = run("jobs", "list").output.splitlines()[:2]
    assert header.split()[-2:] == ["NOT", "DUE"]
    assert row.split() == ["later", "3", "0", "0", "0", "0", "0", "3"]
    assert listed(run)["later"]["waiting_time"] == 3
