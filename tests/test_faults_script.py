"""scripts/faults.sh: the fault tests N rounds in a row, stopping at the first red round with its
pytest status, a table of the rounds, and each round's output kept in a log of its own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ROOT / "scripts" / "faults.sh"


def fake_pytest(directory: Path, red_round: int | None) -> Path:
    """A stand-in for pytest: each call is one round, counted in a file beside it; it prints a
    summary line like pytest's and fails with status 1 on `red_round`."""
    script = directory / "fake-pytest"
    counter = directory / "rounds"
    red = red_round or 0
    script.write_text(
        "#!/usr/bin/env bash\n"
        f"n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}\n"
        'echo "args: $*"\n'
        f'if [ $n = {red} ]; then echo "FAILED tests/x.py::test_b"; '
        'echo "3 passed, 1 failed in 0.01s"; exit 1; fi\n'
        'echo "4 passed in 0.01s"\n'
    )
    script.chmod(0o755)
    return script


def run_faults(
    tmp_path: Path, *args: str, red_round: int | None
) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        SCHEDULER_FAULTS_PYTEST=str(fake_pytest(tmp_path, red_round)),
        # Named servers: the script starts none (and --only distributed asks for no cluster).
        SCHEDULER_KAFKA_BOOTSTRAP="127.0.0.1:1",
        SCHEDULER_CASSANDRA_HOSTS="127.0.0.1:1",
    )
    return subprocess.run(
        ["bash", str(FAULTS), "--only", "distributed", "--logs", str(tmp_path / "logs"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def table_rows(stdout: str) -> list[list[str]]:
    return [line.split()[:4] for line in stdout.splitlines()[1:]]


def test_every_round_green_runs_them_all_and_exits_zero_with_one_table_row_each(
    tmp_path: Path,
) -> None:
    done = run_faults(tmp_path, "--repeat", "3", red_round=None)

    assert done.returncode == 0, done.stderr
    assert [row[:3] for row in table_rows(done.stdout)] == [
        ["1", "4", "0"],
        ["2", "4", "0"],
        ["3", "4", "0"],
    ]
    assert (tmp_path / "rounds").read_text().strip() == "3"
    assert "3 of 3 rounds green" in done.stderr
    assert (tmp_path / "logs" / "table.txt").read_text() == done.stdout


def test_a_red_round_stops_the_loop_and_its_status_is_the_exit_status(tmp_path: Path) -> None:
    done = run_faults(tmp_path, "--repeat", "5", red_round=2)

    assert done.returncode == 1
    assert [row[:3] for row in table_rows(done.stdout)] == [["1", "4", "0"], ["2", "3", "1"]]
    assert (tmp_path / "rounds").read_text().strip() == "2", "a round ran after the red one"
    assert "stopped at red round 2; 1 green before it" in done.stderr
    assert "round-02.log" in done.stderr


def test_each_round_keeps_its_pytest_output_and_gets_the_fault_tests_and_extra_arguments(
    tmp_path: Path,
) -> None:
    done = run_faults(tmp_path, "--repeat", "2", "-k", "restart", red_round=2)

    assert done.returncode == 1
    first = (tmp_path / "logs" / "round-01.log").read_text()
    second = (tmp_path / "logs" / "round-02.log").read_text()
    args = first.splitlines()[0]
    assert "tests/distributed/test_crash.py" in args and args.endswith("-k restart")
    assert "4 passed in" in first
    assert "FAILED tests/x.py::test_b" in second


def test_a_repeat_that_is_not_a_positive_number_is_refused_before_any_round(
    tmp_path: Path,
) -> None:
    done = run_faults(tmp_path, "--repeat", "0", red_round=None)

    assert done.returncode == 2
    assert "--repeat 0 is not a positive whole number" in done.stderr
    assert not (tmp_path / "rounds").exists()
