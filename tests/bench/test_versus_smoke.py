"""`scheduler bench versus` at smoke sizes: both sides run, the table holds every ratio.

The baseline here is this same checkout (its interpreter passed as `--against`): the test proves
the mechanics (two side processes, turns, CPU read from the worker, each checkout's own bench
runs, the thread count, the line count, ratios), not a speed-up.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.test_bench_smoke import SCRIPT, run_bench

METRICS = (
    "execute tasks/s",
    "worker CPU s per 10k tasks (execute)",
    "lag p50 ms",
    "lag p99 ms",
    "worker CPU s per 10k tasks (lag",
    "backlog drain tasks/s",
    "backlog worker RSS peak MB",
    "enqueue schedule_task tasks/s",
    "enqueue schedule_task / raw",
)
REBALANCE = ("rebalance join: moved partitions resume", "rebalance leave: handover gap")
POSITIVE = ("execute", "worker CPU", "backlog", "enqueue")
"""Figures that are positive in any run; lag and rebalance times may be 0 at smoke sizes."""


def _rows(out: Path) -> list[dict]:
    document = json.loads((out / "versus.json").read_text(encoding="utf-8"))
    assert document["environment"]["cpu_probe_ms"] > 0
    assert document["details"]["machine"]["cpu_model"]
    return document["rows"]


def _check(rows: list[dict], backend: str, metrics: tuple[str, ...] = METRICS) -> None:
    mine = [row for row in rows if row["backend"] == backend]
    assert [m for m in metrics if not any(r["metric"].startswith(m) for r in mine)] == []
    for row in mine:
        if row["metric"].startswith(POSITIVE):
            assert row["this"] > 0 and row["baseline"] > 0, row
            assert math.isfinite(row["ratio"]) and row["ratio"] > 0, row
        elif not math.isnan(row["this"]):
            assert row["this"] >= 0 and row["baseline"] >= 0, row


def _check_threads_and_lines(document: dict) -> None:
    """Both checkouts' 64-partition worker was counted, and a checkout against itself has the
    same line count in every area."""
    threads = document["details"]["threads"]
    for side in ("this", "baseline"):
        assert threads[side]["owned"] == threads[side]["partitions"] == 64, threads
        assert threads[side]["threads_after_tasks"] > 1, threads
    rows = {row["metric"]: row for row in document["rows"] if row["backend"] == "-"}
    assert rows["code lines total"]["this"] == rows["code lines total"]["baseline"] > 1000
    assert rows["lines scheduler/engine"]["ratio"] == 1.0
    assert rows["lines total"]["this"] > rows["code lines total"]["this"]


@pytest.mark.slow
@pytest.mark.timeout(720)
def test_versus_runs_both_checkouts_in_turn_and_reports_each_ratio(tmp_path: Path) -> None:
    out = tmp_path / "results"
    output = run_bench(out, "versus", "--against", sys.executable, timeout=710)
    assert "sum(range(10**7)) took" in output
    _check(_rows(out), "embedded")
    document = json.loads((out / "versus.json").read_text(encoding="utf-8"))
    assert not [n for n in document["notes"] if "failed" in n], document["notes"]
    _check_threads_and_lines(document)


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.timeout(1200)
def test_versus_measures_the_worker_on_kafka_and_cassandra_too(tmp_path: Path) -> None:
    out = tmp_path / "results"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # The other scenarios' versus mechanics are the embedded smoke's; here the worker's own
    # figures on the servers (execute) and the scenario only they have (rebalance), to keep the
    # CI within its budget. The scratch dir is kept (under tmp_path) for each side's own
    # rebalance.json: the distributed `bench all` smoke leaves rebalance to this test.
    scenarios = "execute,rebalance"
    run_bench(
        out,
        "versus",
        "--keep-scratch",
        "--against",
        sys.executable,
        "--backends",
        "kafka-cassandra",
        "--scenarios",
        scenarios,
        env={"TMPDIR": str(scratch)},
        timeout=1190,
    )
    rows = _rows(out)
    document = json.loads((out / "versus.json").read_text(encoding="utf-8"))
    assert not [n for n in document["notes"] if "failed" in n], document["notes"]
    assert "threads" not in document["details"] and "lines" not in document["details"]
    _check(rows, "kafka-cassandra", METRICS[:2] + REBALANCE)
    sides = sorted(scratch.glob("scheduler-bench-*/versus-rebalance-kafka-cassandra-*"))
    assert len(sides) == 2, sides  # this checkout's run and the baseline's
    for side in sides:
        changes = json.loads((side / "rebalance.json").read_text(encoding="utf-8"))["rows"]
        moved = {row["change"]: row["moved"] for row in changes}
        # A smoke run proves the command measures something; on a loaded machine the join's
        # moved partitions may not run inside the short window, so either change moving some
        # is enough.
        assert moved["join"] + moved["leave"] > 0, (side.name, changes)


def test_versus_names_the_scenarios_it_knows_when_given_another(tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            SCRIPT,
            "bench",
            "versus",
            "--smoke",
            "--against",
            sys.executable,
            "--scenarios",
            "execute,backlogg",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode != 0
    assert "backlogg" in completed.stderr
    assert "rebalance" in completed.stderr


def test_versus_without_a_baseline_checkout_says_how_to_make_one(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-checkout"
    empty.mkdir()
    completed = subprocess.run(
        [SCRIPT, "bench", "versus", "--smoke", "--against", str(empty), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode != 0
    assert "git worktree add --detach" in completed.stderr
    assert str(empty) in completed.stderr
