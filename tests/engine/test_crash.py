"""kill -9 a real worker process mid-run; a new one runs every task the first accepted."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COUNT = 400


def start(data_dir: Path, out: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.engine.crash_child",
            str(data_dir),
            str(out),
            mode,
            str(COUNT),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_every_accepted_task_runs_after_the_worker_is_killed_with_sigkill(tmp_path):
    out = tmp_path / "executed.txt"
    first = start(tmp_path / "data", out, "enqueue")
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "ACCEPTED"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # let it get some way through, not all the way
            if out.exists() and len(out.read_text().splitlines()) >= 50:
                break
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    executed_before = set(out.read_text().splitlines())
    assert 50 <= len(executed_before) < COUNT, "the kill must land mid-run"

    second = start(tmp_path / "data", out, "drain")
    stdout, _ = second.communicate(timeout=180)
    assert second.returncode == 0 and "IDLE" in stdout
    executed = set(out.read_text().splitlines())
    assert executed == {f"task-{i:05d}" for i in range(COUNT)}
