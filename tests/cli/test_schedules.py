"""`scheduler schedules` against an embedded worker in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import SCRIPT
from tests.cli.helpers import wait_for

PROGRAMS = f"""
[programs.hello]
kind = "command"
argv = ["{sys.executable}", "-c", "print('hello {{{{_logical_time}}}}')"]
"""

SCHEDULES = """
[schedules.tick]
program = "hello"
description = "every second"
trigger = {type = "TIME", cronExpression = "* * * * * *"}

[schedules.daily]
program = "hello"
trigger = {type = "PARTITION", dataset = "clicks", numPartitions = 2}
constraints = [{type = "CONCURRENCY", maxConcurrency = 1}]
"""


@pytest.fixture
def with_programs(embedded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "programs.toml"
    path.write_text(PROGRAMS)
    monkeypatch.setenv("SCHEDULER_PROGRAMS_FILE", str(path))
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


def started(worker, data: Path) -> None:
    """A worker that has made its data directory (the schedules commands read it)."""
    worker()
    wait_for(lambda: (data / "store.db").exists() and (data / "log.db").exists())


def listed(run, *args: str) -> list[dict]:
    result = run("schedules", "list", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_schedules_are_created_disabled_enabled_and_run_their_program(
    with_programs: Path, run, worker, embedded: Path
) -> None:
    started(worker, embedded)
    file = with_programs / "schedules.toml"
    file.write_text(SCHEDULES)
    created = run("schedules", "create", str(file))
    assert created.exit_code == 0, created.output
    assert [(s["schedule"]["name"], s["status"]) for s in listed(run)] == [
        ("daily", "DISABLED"),
        ("tick", "DISABLED"),
    ]
    again = run("schedules", "create", str(file))
    assert again.exit_code == 5 and "exist already" in again.output
    assert run("schedules", "enable", "tick").exit_code == 0
    conflict = run("schedules", "enable", "tick")
    assert conflict.exit_code == 5 and "enabled already" in conflict.output
    assert [s["schedule"]["name"] for s in listed(run, "--status", "enabled")] == ["tick"]
    assert [s["schedule"]["name"] for s in listed(run, "--trigger-type", "PARTITION")] == ["daily"]

    def scheduled() -> list[dict]:
        out = run("runs", "list", "--json", "--program", "hello", "--status", "COMPLETED")
        return [r for r in json.loads(out.output) if r["started_by"] == "schedule:tick"]

    assert wait_for(scheduled)
    assert run("schedules", "disable", "tick").exit_code == 0
    nexts = json.loads(run("schedules", "next-runs", "tick", "--count", "3", "--json").output)
    assert len(nexts) == 3 and nexts[1]["time_ms"] - nexts[0]["time_ms"] == 1000
    jobs = json.loads(run("schedules", "jobs", "tick", "--json").output)
    assert jobs and jobs[0]["state"] == "PENDING_LAUNCH"
    # Each launched job names its run, for `runs show`.
    assert jobs[0]["run_id"] in {r["run_id"] for r in scheduled()}
    # It stays PENDING_LAUNCH (the seeds' last job state); its run's status says how it went.
    assert jobs[0]["run_status"] == "COMPLETED"
    shown = run("runs", "show", jobs[0]["run_id"])
    assert shown.exit_code == 0 and "schedule:tick" in shown.output
    # The run says where its output went, whether it ran alone or in a launch batch.
    record = json.loads(run("runs", "show", jobs[0]["run_id"], "--json").output)
    assert Path(record["output"]).read_text().startswith("hello "), record
    assert "  RUN  " in run("schedules", "jobs", "tick").output.splitlines()[0]
    assert "  RUN STATUS  " in run("schedules", "jobs", "tick").output.splitlines()[0]
    # An open job says what it waits for.
    assert run("schedules", "enable", "daily").exit_code == 0
    assert run("events", "publish-partition", "clicks", "h00").exit_code == 0
    waiting = "PARTITION trigger on clicks: 1 of 2 partitions"
    assert wait_for(lambda: waiting in run("schedules", "jobs", "daily").output)
    (job,) = json.loads(run("schedules", "jobs", "daily", "--json").output)
    assert job["waiting_for"] == [waiting] and job["run_id"] is None and job["run_status"] is None
    table = run("schedules", "list")
    assert table.output.splitlines()[0].split()[:4] == ["SCHEDULE", "STATUS", "TRIGGER", "PROGRAM"]
    rows = {line.split()[0]: line for line in table.output.splitlines()[1:]}
    assert "cron * * * * * *" in rows["tick"] and "2 partitions of clicks" in rows["daily"]


def test_unknown_names_exit_4_and_a_batch_delete_with_one_deletes_nothing(
    with_programs: Path, run, worker, embedded: Path
) -> None:
    started(worker, embedded)
    file = with_programs / "schedules.toml"
    file.write_text(SCHEDULES)
    assert run("schedules", "create", str(file)).exit_code == 0
    missing = run("schedules", "show", "nope")
    assert missing.exit_code == 4 and "no schedule 'nope'" in missing.output
    batch = run("schedules", "delete", "tick", "nope")
    assert batch.exit_code == 4
    assert len(listed(run)) == 2
    # Reading schedules needs no programs file (one moved away, or being edited).
    programs = with_programs.parent / "programs.toml"
    programs.rename(programs.with_suffix(".moved"))
    assert [s["schedule"]["name"] for s in listed(run)] == ["daily", "tick"]
    assert run("schedules", "jobs", "tick").exit_code == 0
    programs.with_suffix(".moved").rename(programs)
    assert run("schedules", "delete", "tick", "daily").exit_code == 0
    assert listed(run) == []


def test_apply_updates_and_deletes_what_the_file_declared_unless_told_not_to(
    with_programs: Path, run, worker, embedded: Path
) -> None:
    started(worker, embedded)
    file = with_programs / "pipeline.toml"
    file.write_text(SCHEDULES)
    first = json.loads(run("schedules", "apply", str(file), "--json").output)
    assert first["created"] == ["tick", "daily"]
    file.write_text(SCHEDULES.replace("every second", "each second").split("[schedules.daily]")[0])
    frozen = json.loads(
        run("schedules", "apply", str(file), "--no-update-schedules", "--json").output
    )
    assert frozen == {"created": [], "updated": [], "deleted": [], "unchanged": ["tick"]}
    second = json.loads(run("schedules", "apply", str(file), "--json").output)
    assert (second["updated"], second["deleted"]) == (["tick"], ["daily"])
    shown = json.loads(run("schedules", "show", "tick", "--json").output)
    assert shown["schedule"]["description"] == "each second"


def test_apply_reads_an_array_of_tables_and_a_conflict_names_who_declared_the_schedule(
    with_programs: Path, run, worker, embedded: Path
) -> None:
    started(worker, embedded)
    nightly = '[[schedules]]\nname = "nightly"\nprogram = "hello"\n'
    nightly += 'trigger = {type = "TIME", cronExpression = "0 2 * * *"}\n'
    (with_programs / "deploy.toml").write_text(nightly)
    (with_programs / "other.toml").write_text(nightly)
    # `[[schedules]]` ended in a Python traceback: only `[schedules.NAME]` tables were read.
    first = run("schedules", "apply", str(with_programs / "deploy.toml"), "--json")
    assert json.loads(first.output)["created"] == ["nightly"], first.output
    refused = run("schedules", "apply", str(with_programs / "other.toml"))
    assert refused.exit_code == 5
    assert "not declared by 'apply:other' but by 'apply:deploy'" in refused.output
    # The source as the message shows it is taken as is, not prefixed again.
    again = run("schedules", "apply", str(with_programs / "other.toml"), "--source", "apply:deploy")
    assert again.exit_code == 0 and "unchanged: nightly" in again.output, again.output
    (with_programs / "bad.toml").write_text("[schedules]\nnightly = 3\n")
    bad = run("schedules", "apply", str(with_programs / "bad.toml"))
    assert bad.exit_code == 2, bad.output  # a bad request, not a traceback (exit 1)
    assert "schedules.nightly is not a table; write each schedule as a [schedules.NAME]" in (
        bad.output
    )


def test_a_file_item_that_is_not_an_object_is_named_by_its_place(with_programs: Path, run) -> None:
    # A string item was parsed again as JSON text, and reported as "a schedule must be JSON".
    file = with_programs / "odd.json"
    file.write_text('[1, "x"]')
    said = run("schedules", "create", str(file))
    assert said.exit_code == 2, said.output
    assert f"{file}: schedule 1 is int 1; each schedule is an object with name" in said.output
    assert f"{file}: schedule 2 is str 'x'; each schedule is an object" in said.output
    assert "must be JSON" not in said.output


def _started_saying(tmp: Path, name: str) -> str:
    """Start `scheduler worker` (the test's environment), wait for its banner's last line,
    stop it; what it wrote (stdout, then stderr)."""
    out, err = tmp / f"{name}.out", tmp / f"{name}.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen([SCRIPT, "worker"], stdout=stdout, stderr=stderr)
        try:
            wait_for(lambda: "stop with Ctrl-C" in out.read_text() or process.poll() is not None)
        finally:
            process.terminate()
            process.wait(30)
    return out.read_text() + err.read_text()


def test_a_worker_without_programs_warns_of_the_enabled_schedules_it_would_stop(
    with_programs: Path, run, worker, embedded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It takes its share of the schedules' tick tasks from the group and fails them for good
    (executor auto, no `schedules` route) or runs them as no-ops (noop): it says so at start."""
    first = worker()
    wait_for(lambda: (embedded / "store.db").exists() and (embedded / "log.db").exists())
    file = with_programs / "schedules.toml"
    file.write_text(SCHEDULES)
    assert run("schedules", "create", str(file)).exit_code == 0
    assert run("schedules", "enable", "tick").exit_code == 0
    first.terminate()
    first.wait(30)
    said = _started_saying(with_programs, "with-programs")
    assert "enabled schedules" not in said
    assert "schedules and runs: programs from " in said and "(hello)" in said
    monkeypatch.delenv("SCHEDULER_PROGRAMS_FILE")
    for executor, how in (
        ("auto", "fails them for good"),
        ("noop", "as its own work (executor 'noop')"),
    ):
        monkeypatch.setenv("SCHEDULER_EXECUTOR", executor)
        said = _started_saying(with_programs, executor)
        assert "this deployment has enabled schedules (tick and maybe more)" in said, said
        assert how in said and "SCHEDULER_PROGRAMS_FILE" in said
        # The banner of a routing worker says what it does not run (another runs what it gets).
        assert ("tasks only; schedules, runs and batch jobs are not run here" in said) == (
            executor == "auto"
        )


def test_schedules_created_before_any_worker_ran_begin_the_data_dir_and_run_once_one_starts(
    with_programs: Path, run, worker, embedded: Path
) -> None:
    # Creating adds to the deployment, as `enqueue` does: it may begin the data directory
    # (looking at one nothing ran in is refused: tests/cli/test_inspecting_creates_nothing.py).
    assert not embedded.exists()
    file = with_programs / "schedules.toml"
    file.write_text(SCHEDULES)
    # No worker applies the creation yet: without --wait 0 it would wait 30 s, then exit 3
    # saying it applies when one starts. A worker started later applies it.
    created = run("schedules", "create", str(file), "--wait", "0")
    assert created.exit_code == 0, created.output
    assert "created daily, tick" in created.output or "created tick, daily" in created.output
    assert "(sent, not waited for: a worker with programs applies it)" in created.output
    worker()
    assert wait_for(lambda: len(listed(run)) == 2)
    enabled = run("schedules", "enable", "tick")
    assert enabled.exit_code == 0, enabled.output

    def scheduled() -> list[dict]:
        out = run("runs", "list", "--json", "--program", "hello", "--status", "COMPLETED")
        return [r for r in json.loads(out.output) if r["started_by"] == "schedule:tick"]

    assert wait_for(scheduled)


def test_a_change_no_worker_applies_says_that_it_waits_then_exits_3(
    with_programs: Path, script, embedded: Path
) -> None:
    file = with_programs / "schedules.toml"
    file.write_text(SCHEDULES)
    completed = script("schedules", "create", str(file), "--wait", "4")
    assert completed.returncode == 3, completed.stderr
    # Said after 3 s, before the end of the wait, so a user does not take the wait for a hang.
    assert "no worker has applied the change(s) to ['tick', 'daily'] yet" in completed.stderr
    assert "They apply when one starts" in completed.stderr


def test_next_and_previous_runs_from_a_given_time_show_the_crons_wall_time_across_dst(
    with_programs: Path, run, worker, embedded: Path
) -> None:
    started(worker, embedded)
    file = with_programs / "berlin.toml"
    file.write_text(
        '[schedules.berlin]\nprogram = "hello"\n'
        'trigger = {type = "TIME", cronExpression = "30 2 * * *", timeZone = "Europe/Berlin"}\n'
    )
    assert run("schedules", "create", str(file)).exit_code == 0
    # 2027-03-28 has no 02:30 in Berlin (02:00 -> 03:00): that day's fire is at 03:00 CEST.
    shown = run("schedules", "next-runs", "berlin", "--after", "2027-03-26T12:00Z", "--count", "3")
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines() == [
        "2027-03-27T01:30:00.000Z  2027-03-27 02:30:00 CET",
        "2027-03-28T01:00:00.000Z  2027-03-28 03:00:00 CEST",
        "2027-03-29T00:30:00.000Z  2027-03-29 02:30:00 CEST",
    ]
    before = run("schedules", "previous-runs", "berlin", "--before", "2027-03-28T01:00Z")
    assert before.output.splitlines()[0] == "2027-03-27T01:30:00.000Z  2027-03-27 02:30:00 CET"
    as_json = run("schedules", "next-runs", "berlin", "--after", "2027-03-26T12:00Z", "--json")
    assert json.loads(as_json.output)[0]["time"] == "2027-03-27T01:30:00.000Z"
    refused = run("schedules", "next-runs", "berlin", "--after", "next tuesday")
    assert refused.exit_code == 2 and "Invalid value for --after" in refused.output


def test_a_file_of_schedules_reports_every_bad_schedule_and_creates_none(
    with_programs: Path, run, embedded: Path
) -> None:
    file = with_programs / "bad.toml"
    file.write_text(
        SCHEDULES + '[schedules.late]\nprogram = "hello"\n'
        'trigger = {type = "TIME", cronExpression = "61 * * * *"}\n'
        '[schedules.few]\nprogram = "hello"\n'
        'trigger = {type = "PARTITION", dataset = "clicks", numPartitions = 0}\n'
    )
    refused = run("schedules", "create", str(file), "--wait", "0")
    assert refused.exit_code == 2
    assert "schedule 'late' is not valid" in refused.output and "bad minute field" in refused.output
    assert "schedule 'few' is not valid" in refused.output and "numPartitions" in refused.output
    assert not embedded.exists()  # nothing was sent, so nothing began the data directory


def test_python_declares_schedules_with_connect_schedules_as_the_cli_does(
    with_programs: Path, run, worker, embedded: Path
) -> None:
    """`scheduler.connect_schedules()` reads the settings the workers read, as `connect()`."""
    import scheduler
    from scheduler import Schedule, Time

    started(worker, embedded)
    every_second = Schedule(name="py", program="hello", trigger=Time(cron="* * * * * *"))
    with scheduler.connect_schedules() as schedules:
        schedules.create(every_second)  # waits until the worker applied it
        schedules.enable("py")
        assert schedules.get("py").enabled
        with pytest.raises(scheduler.ScheduleConflictError, match="enabled already"):
            schedules.enable("py")
    assert [s["schedule"]["name"] for s in listed(run)] == ["py"]

    def scheduled() -> list[dict]:
        out = run("runs", "list", "--json", "--program", "hello", "--status", "COMPLETED")
        return [r for r in json.loads(out.output) if r["started_by"] == "schedule:py"]

    assert wait_for(scheduled)
