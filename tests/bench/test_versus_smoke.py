"""`scheduler bench versus` at smoke sizes: both sides run, the table holds every ratio.

The baseline here is this same checkout (its interpreter passed as `--against`): the test proves
the mechanics (two side processes, turns, CPU read from the worker, ratios), not a speed-up.
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
)


def _rows(out: Path) -> list[dict]:
    document = json.loads((out / "versus.json").read_text(encoding="utf-8"))
    assert document["environment"]["cpu_probe_ms"] > 0
    assert document["details"]["machine"]["cpu_model"]
    return document["rows"]


def _check(rows: list[dict], backend: str) -> None:
    mine = [row for row in rows if row["backend"] == backend]
    assert [m for m in METRICS if not any(r["metric"].startswith(m) for r in mine)] == []
    for row in mine:
        if row["metric"].startswith("lag p"):
            assert row["this"] >= 0 and row["baseline"] >= 0, row
        else:
            assert row["this"] > 0 and row["baseline"] > 0, row
            assert math.isfinite(row["ratio"]) and row["ratio"] > 0, row


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_versus_runs_both_checkouts_in_turn_and_reports_each_ratio(tmp_path: Path) -> None:
    out = tmp_path / "results"
    output = run_bench(out, "versus", "--against", sys.executable, timeout=230)
    assert "sum(range(10**7)) took" in output
    _check(_rows(out), "embedded")


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.timeout(600)
def test_versus_measures_the_worker_on_kafka_and_cassandra_too(tmp_path: Path) -> None:
    out = tmp_path / "results"
    run_bench(
        out, "versus", "--against", sys.executable, "--backends", "kafka-cassandra", timeout=590
    )
    rows = _rows(out)
    document = json.loads((out / "versus.json").read_text(encoding="utf-8"))
    assert not [n for n in document["notes"] if "failed" in n], document["notes"]
    _check(rows, "kafka-cassandra")


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
