"""`scheduler programs`, `runs` and `events` against an embedded worker in a subprocess."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.programs.events import DataAvailableEvent, decode_event
from tests.cli.helpers import wait_for

PROGRAMS = f"""
[programs.hello]
kind = "command"
argv = ["{sys.executable}", "-c", "print('hello {{{{who}}}}')"]
properties = {{who = "world"}}
description = "says hello"

[programs.sleepy]
kind = "command"
argv = ["{sys.executable}", "-c", "import time; time.sleep(60)"]
"""


@pytest.fixture
def with_programs(embedded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "programs.toml"
    path.write_text(PROGRAMS)
    monkeypatch.setenv("SCHEDULER_PROGRAMS_FILE", str(path))
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "auto")
    return embedded


def runs_json(run, *args: str) -> list[dict]:
    result = run("runs", "list", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_programs_are_listed_and_shown_from_the_programs_file(with_programs, run) -> None:
    listed = run("programs", "list")
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines()[1:] == ["hello    command  says hello", "sleepy   command"]
    shown = json.loads(run("programs", "show", "hello", "--json").output)
    assert shown["properties"] == {"who": "world"}
    table = run("programs", "show", "hello").output.splitlines()
    assert 'properties:  {"who": "world"}' in table  # JSON, as written, not Python's repr
    unknown = run("programs", "show", "nope")
    assert unknown.exit_code == 4
    assert "unknown program 'nope'; known programs: hello, sleepy" in unknown.output


def test_a_start_says_who_asked_and_how_to_follow_the_run(with_programs, run) -> None:
    said = run("runs", "start", "hello", "--request-id", "nightly-fix-1")
    assert said.exit_code == 0, said.output
    run_id = said.output.split()[1]
    assert said.output.startswith(f"run {run_id} of hello requested by operator:")
    assert "(request id nightly-fix-1)" in said.output
    assert f"`scheduler runs show {run_id[:8]}` shows its progress" in said.output


def test_an_unknown_program_is_not_started(with_programs, run) -> None:
    result = run("runs", "start", "nope")
    assert result.exit_code == 4
    assert "known programs: hello, sleepy" in result.output


def test_a_program_started_by_hand_runs_and_a_sleeping_one_is_killed(
    with_programs, run, worker
) -> None:
    worker()
    started = run("runs", "start", "hello", "--arg", "who=ops", "--json")
    assert started.exit_code == 0, started.output
    run_id = json.loads(started.output)["run_id"]
    done = wait_for(
        lambda: [r for r in runs_json(run, "--status", "completed") if r["run_id"] == run_id]
    )
    assert done and done[0]["arguments"]["who"] == "ops"
    assert done[0]["started_by"].startswith("operator:")
    shown = run("runs", "show", run_id[:8])  # the start of an id, as the dashboard shows it
    assert f"run_id:       {run_id}" in shown.output and "status:       COMPLETED" in shown.output
    arguments = next(line for line in shown.output.splitlines() if line.startswith("arguments:"))
    assert json.loads(arguments.removeprefix("arguments:"))["who"] == "ops"  # JSON, not repr
    out = list((with_programs / "logs" / "command").rglob("*.out"))
    assert [f.read_text() for f in out] == ["hello ops\n"]
    assert f"output:       {out[0]}" in shown.output  # the run says where its output went

    sleepy = json.loads(run("runs", "start", "sleepy", "--json").output)["run_id"]
    assert wait_for(lambda: runs_json(run, "--program", "sleepy", "--status", "RUNNING"))
    killed = run("runs", "kill", sleepy[:8])
    assert killed.exit_code == 0, killed.output
    assert f"run {sleepy} is being killed" in killed.output
    assert wait_for(lambda: runs_json(run, "--program", "sleepy", "--status", "KILLED"))
    again = run("runs", "kill", sleepy)
    assert again.exit_code == 5  # conflict: it already ended (cli/exit_codes.py)
    assert "already ended KILLED" in again.output
    table = run("runs", "list").output.splitlines()
    assert table[0].split()[:3] == ["RUN", "PROGRAM", "STATUS"]
    assert [line.split()[1:3] for line in table[1:]] == [
        ["sleepy", "KILLED"],
        ["hello", "COMPLETED"],
    ]


def test_a_program_declared_after_the_worker_started_runs_without_a_restart(
    with_programs, run, worker
) -> None:
    worker()
    first = json.loads(run("runs", "start", "hello", "--json").output)["run_id"]
    assert wait_for(  # the worker has read its programs file
        lambda: [r for r in runs_json(run, "--status", "completed") if r["run_id"] == first]
    )
    path = Path(os.environ["SCHEDULER_PROGRAMS_FILE"])
    late = f'''
[programs.late]
kind = "command"
argv = ["{sys.executable}", "-c", "print('declared late')"]
'''
    path.write_text(PROGRAMS + late)
    started = run("runs", "start", "late", "--json")
    assert started.exit_code == 0, started.output
    run_id = json.loads(started.output)["run_id"]
    assert wait_for(
        lambda: [r for r in runs_json(run, "--status", "completed") if r["run_id"] == run_id]
    )


def test_an_empty_listing_says_what_there_is_none_of(
    embedded: Path, run, worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header alone on stdout (a script reads an empty table), and a hint on stderr."""
    monkeypatch.delenv("SCHEDULER_PROGRAMS_FILE", raising=False)
    worker()
    wait_for(lambda: (embedded / "store.db").exists())
    programs = run("programs", "list")
    assert programs.stdout == "PROGRAM  KIND  DESCRIPTION\n"
    assert "no programs: set programs_file (SCHEDULER_PROGRAMS_FILE)" in programs.stderr
    runs = run("runs", "list", "--program", "hello", "--status", "failed")
    assert runs.stdout.splitlines() == [
        "RUN  PROGRAM  STATUS  STARTED BY  CREATED  ENDED  ATTEMPTS"
    ]
    assert "no runs of hello FAILED in the run store" in runs.stderr
    assert run("runs", "list", "--json").stdout == "[]\n"
    schedules = run("schedules", "list")
    assert "no schedules: `scheduler schedules create FILE` adds some" in schedules.stderr
    batch = run("jobs", "list")  # exited 4 (not found) before any batch file was loaded
    assert batch.exit_code == 0 and batch.stdout.startswith("JOB  PAUSED  TOTAL")
    assert "no batch jobs: no configuration is loaded; `scheduler jobs load FILE`" in batch.stderr
    assert run("jobs", "list", "--json").stdout == "[]\n"
    empty = tmp_path / "none.toml"
    empty.write_text("[programs]\n")
    monkeypatch.setenv("SCHEDULER_PROGRAMS_FILE", str(empty))
    assert f"no programs in {empty}" in run("programs", "list").stderr


def test_a_missing_run_is_said_by_its_id(with_programs, run, worker) -> None:
    worker()
    wait_for(lambda: (with_programs / "store.db").exists())
    result = run("runs", "show", "no-such-run")
    assert result.exit_code == 4
    assert "no run 'no-such-run' in the run store" in result.output


def test_publish_partition_puts_a_data_event_on_the_events_topic(with_programs, run) -> None:
    result = run("events", "publish-partition", "clicks", "2026-01-01T05", "2026-01-01T06")
    assert result.exit_code == 0, result.output
    log = EmbeddedTaskLog(path=str(with_programs / "log.db"), topic="scheduler-tasks-events")
    try:
        consumer = log.consumer("reader", client_id="test")

        class Listener:
            def on_assigned(self, partitions):  # type: ignore[no-untyped-def]
                pass

            on_revoked = on_lost = on_assigned

        consumer.subscribe(Listener())
        records = wait_for(lambda: consumer.poll(10, 0.5), timeout=10)
        consumer.close()
    finally:
        log.close()
    [record] = records
    event = decode_event(record.value)
    assert isinstance(event, DataAvailableEvent)
    assert (event.dataset, event.partitions) == ("clicks", ("2026-01-01T05", "2026-01-01T06"))
    assert record.key == b"dataset:clicks"


def test_runs_list_pages_with_the_after_cursor_it_prints(with_programs, run) -> None:
    from scheduler.config import load_settings
    from scheduler.programs.runtime import open_run_store
    from scheduler.runtime import open_store
    from tests.contracts.test_run_store_contract import BASE_MS, a_run

    settings = load_settings()
    store = open_store(settings, create_schema=True)
    runs = open_run_store(settings, store)
    made = [runs.create(a_run(request=f"r{i}", created_ms=BASE_MS + i // 2)) for i in range(5)]
    runs.close()
    store.close()
    newest_first = [r.run_id for r in sorted(made, key=lambda r: (-r.created_ms, r.run_id))]

    seen: list[str] = []
    after: list[str] = []
    for _ in range(3):
        page = run("runs", "list", "--json", "--limit", "2", *after)
        assert page.exit_code == 0, page.output
        seen += [r["run_id"] for r in json.loads(page.stdout)]
        hint = [line for line in page.stderr.splitlines() if line.startswith("next page: ")]
        if not hint:
            break
        after = hint[0].removeprefix("next page: ").split()
    assert seen == newest_first
    assert not hint  # the third page is the last

    wrong = run("runs", "list", "--after", "nonsense")
    assert wrong.exit_code == 2
    assert "is not a `next_cursor` of a runs listing" in wrong.output
