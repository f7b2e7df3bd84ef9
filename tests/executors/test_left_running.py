"""Commands a worker left running when it was killed: noted while they run, stopped by the next
worker on the data directory unless their own worker still lives (real processes, /proc)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from scheduler.executors.left_running import (
    _members,
    _runs,
    _started,
    _where,
    stop_left_running,
)
from tests.cli.helpers import ended, wait_for, watcher_of

# A stand-in worker: starts a command of two processes in a group of its own, notes it as the
# command executor does, says the group's id, and waits to be killed.
WORKER = """
import subprocess, sys, time
from pathlib import Path
from scheduler.executors.left_running import note_running
command = subprocess.Popen(["/bin/sh", "-c", "SHELL"], start_new_session=True)
note_running(Path(sys.argv[1]), command.pid, "orders/2026-11-28T00:00:00Z/nightly")
print(command.pid, flush=True)
time.sleep(300)
"""

# A stand-in worker with its watcher: ends the watcher as a clean stop does when told "stop".
WATCHED = """
import subprocess, sys
from pathlib import Path
from scheduler.executors.left_running import note_running, watch
notes = Path(sys.argv[1])
stop = watch([notes, notes.parent / "spark-submit-notes"])
command = subprocess.Popen(["/bin/sh", "-c", "sleep 300 & sleep 300"], start_new_session=True)
note_running(notes, command.pid, "orders/2026-11-28T00:00:00Z/nightly")
print(command.pid, flush=True)
if sys.stdin.readline().strip() == "stop":
    stop()
    print("stopped", flush=True)
sys.stdin.readline()
"""


def alive(pgid: int) -> list[int]:
    started = _started(pgid)
    return _members(pgid, started) if started is not None else _members(pgid, 0)


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[str], int, Path]]]:
    """Start stand-in workers (their command a shell line); kills what they started at the end."""
    started: list[tuple[subprocess.Popen[str], int]] = []

    def start(shell: str = "sleep 300 & sleep 300") -> tuple[subprocess.Popen[str], int, Path]:
        notes = tmp_path / ".running"
        script = WORKER.replace("SHELL", shell)
        worker = subprocess.Popen(
            [sys.executable, "-c", script, str(notes)], stdout=subprocess.PIPE, text=True
        )
        assert worker.stdout is not None
        pgid = int(worker.stdout.readline())
        started.append((worker, pgid))
        assert wait_for(lambda: len(alive(pgid)) >= 2, timeout=10)  # the shell and its sleeps
        return worker, pgid, notes

    yield start
    for worker, pgid in started:
        worker.kill()
        worker.wait()
        with suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def test_the_command_of_a_killed_worker_is_stopped_whole_and_its_note_removed(stand_in) -> None:
    worker, pgid, notes = stand_in()
    assert [n.name for n in notes.iterdir()] == [f"{_where()[1]}-{pgid}.json"]
    worker.kill()
    worker.wait()
    assert len(alive(pgid)) >= 2  # a worker's SIGKILL does not reach its command's group

    stopped = stop_left_running(notes, grace_s=2)

    assert stopped == ["orders/2026-11-28T00:00:00Z/nightly"]
    assert alive(pgid) == [] and list(notes.iterdir()) == []


def test_a_live_workers_command_is_left_alone(stand_in) -> None:
    _, pgid, notes = stand_in()
    assert stop_left_running(notes, grace_s=0.5) == []
    assert len(alive(pgid)) >= 2 and (notes / f"{_where()[1]}-{pgid}.json").exists()


def test_a_term_ignoring_command_is_killed_after_the_grace(stand_in) -> None:
    worker, pgid, notes = stand_in('trap \\"\\" TERM; sleep 300 & wait')
    worker.kill()
    worker.wait()
    began = time.monotonic()
    assert stop_left_running(notes, grace_s=1) == ["orders/2026-11-28T00:00:00Z/nightly"]
    assert time.monotonic() - began >= 1 and alive(pgid) == []


def test_notes_of_ended_commands_and_half_written_notes_are_dropped(tmp_path: Path) -> None:
    notes = tmp_path / ".running"
    notes.mkdir()
    ended = subprocess.Popen(["/bin/true"], start_new_session=True)
    ended.wait()
    boot, space = _where() or ("", "")
    gone = {"pid": ended.pid, "started": 1, "task": "t/1/u", "worker": 1, "worker_started": -1}
    gone |= {"boot": boot, "pid_namespace": space}
    (notes / f"{ended.pid}.json").write_text(json.dumps(gone))
    (notes / "12.json").write_text('{"pid": 12, "sta')
    assert stop_left_running(notes) == [] and list(notes.iterdir()) == []
    assert stop_left_running(tmp_path / "never-made") == []


def test_notes_from_another_boot_are_dropped_and_another_containers_left_alone(
    stand_in,
) -> None:
    # A data directory shared by containers: a note's pids name other processes here.
    worker, pgid, notes = stand_in()
    worker.kill()
    worker.wait()
    (note,) = notes.iterdir()
    seen = json.loads(note.read_text())
    note.write_text(json.dumps({**seen, "pid_namespace": "4026531999"}))
    assert stop_left_running(notes, grace_s=0.5) == []
    assert note.exists() and len(alive(pgid)) >= 2
    note.write_text(json.dumps({**seen, "boot": "an-earlier-boot"}))
    assert stop_left_running(notes, grace_s=0.5) == []
    assert not note.exists() and len(alive(pgid)) >= 2  # dropped, never signalled


def test_a_group_whose_number_leads_a_new_group_is_not_signalled(tmp_path: Path) -> None:
    # The command ended; its number now leads another group (made here by a new process whose
    # start differs from the note's).
    other = subprocess.Popen(["/bin/sleep", "30"], start_new_session=True)
    try:
        seen = {"pid": other.pid, "started": _started(other.pid) - 1, "task": "t/1/u"}
        notes = tmp_path / ".running"
        notes.mkdir()
        boot, space = _where()
        dead = {"worker": 1, "worker_started": -1, "boot": boot, "pid_namespace": space}
        (notes / f"{space}-{other.pid}.json").write_text(json.dumps({**seen, **dead}))
        assert stop_left_running(notes, grace_s=0.5) == []
        assert other.poll() is None and list(notes.iterdir()) == []
    finally:
        other.kill()
        other.wait()


def test_the_watcher_stops_a_killed_workers_command_at_once(tmp_path: Path) -> None:
    # No worker starts after it: the watcher alone stops what the killed one left running.
    notes = tmp_path / "notes"
    worker = subprocess.Popen(
        [sys.executable, "-c", WATCHED, str(notes)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert worker.stdout is not None and worker.stderr is not None
    pgid = int(worker.stdout.readline())
    try:
        watcher = watcher_of(worker)
        assert wait_for(lambda: len(alive(pgid)) >= 2, timeout=10)
        worker.kill()  # not reaped yet: a zombie still has its /proc entry
        assert wait_for(lambda: alive(pgid) == [], timeout=15)
        assert list(notes.iterdir()) == []
        assert wait_for(lambda: ended(watcher), timeout=10)
        worker.wait()
        # The watcher writes to the worker's stderr: its line is in the worker's log.
        logged = worker.stderr.read()
        assert "stopped the command of task orders/2026-11-28T00:00:00Z/nightly" in logged
        assert f"that worker process {worker.pid} left running when it died" in logged
    finally:
        worker.kill()
        worker.wait()
        with suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def test_a_clean_stop_ends_the_watcher_and_leaves_the_command_to_its_worker(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes"
    worker = subprocess.Popen(
        [sys.executable, "-c", WATCHED, str(notes)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert worker.stdin is not None and worker.stdout is not None
    pgid = int(worker.stdout.readline())
    try:
        watcher = watcher_of(worker)
        worker.stdin.write("stop\n")
        worker.stdin.flush()
        assert worker.stdout.readline() == "stopped\n"
        assert wait_for(lambda: ended(watcher), timeout=10)
        # What a stopping worker still runs is its own to end; the watcher touched nothing.
        assert len(alive(pgid)) >= 2 and len(list(notes.iterdir())) == 1
    finally:
        worker.kill()
        worker.wait()
        with suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def test_a_dead_unreaped_process_does_not_run() -> None:
    child = subprocess.Popen(["/bin/true"])
    since = _started(child.pid)
    assert since is not None
    assert wait_for(lambda: not _runs(child.pid, since), timeout=10)  # a zombie until reaped
    assert _started(child.pid) == since  # still in /proc
    child.wait()
    assert not _runs(child.pid, since)
