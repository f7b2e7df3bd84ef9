"""versus's whole-scenario sides: each checkout runs its own `scheduler bench backlog|rebalance|
enqueue`, in turn.

These scenarios start their own backends and workers (a million overdue tasks, a second worker
joining, no worker at all), so unlike execute and lag they do not fit a long-lived side driver.
Each round runs the scenario's command once per checkout (`<python> -P -c "...main()" bench
<scenario> --repeat 1 --backends KIND --out DIR`), the order alternating between rounds, and
reads the figures back from the JSON it wrote: the baseline measures with its own bench code.
`METRICS` names the figures compared and which way is better.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scheduler.bench.common import BenchOptions

SCENARIOS = ("backlog", "rebalance", "enqueue")
HIGHER = "higher"
LOWER = "lower"
TIMEOUT_S = 4 * 3600.0
"""A full-size backlog (a million tasks) takes minutes; a loaded machine, many more."""
MAIN = "from scheduler.cli.main import main; main()"

BACKLOG = {
    "drain_per_s": ("backlog drain tasks/s", HIGHER),
    "incl_start_per_s": ("backlog drain tasks/s incl. worker start", HIGHER),
    "enqueue_per_s": ("backlog enqueue tasks/s (schedule_tasks)", HIGHER),
    "rss_idle_mb": ("backlog worker RSS idle MB", LOWER),
    "rss_peak_mb": ("backlog worker RSS peak MB", LOWER),
}
REBALANCE = {
    "moved_resume_max_ms": ("moved partitions resume, max ms", LOWER),
    "handover_gap_max_ms": ("handover gap, max ms", LOWER),
    "kept_max_gap_ms": ("kept partitions' largest gap ms", LOWER),
    "stalled": ("stalled partitions", LOWER),
}


def command(python: Path, scenario: str, kind: str, out: Path, options: BenchOptions) -> list[str]:
    """The argv that runs one scenario once with a checkout's interpreter and bench code."""
    config = ["--config", str(options.config.resolve())] if options.config is not None else []
    argv = [str(python), "-P", "-c", MAIN, *config, "bench", scenario, "--repeat", "1"]
    argv += ["--backends", kind, "--out", str(out)]
    return argv + (["--smoke"] if options.smoke else [])


def run_once(
    python: Path, scenario: str, kind: str, options: BenchOptions, label: str
) -> dict[str, Any]:
    """One run of `scenario` by one checkout; its JSON document. Raises with the log's tail when
    the command fails or the scenario reports its backend failed."""
    out = options.scratch / f"versus-{scenario}-{kind}-{label}"
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "bench.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with log_path.open("ab") as log:
        completed = subprocess.run(
            command(python, scenario, kind, out, options),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=out,
            timeout=TIMEOUT_S,
            check=False,
        )
    result = out / f"{scenario}.json"
    if completed.returncode != 0 or not result.is_file():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(
            f"`bench {scenario}` of {python} exited {completed.returncode}; its log {log_path} "
            f"ends:\n{tail}"
        )
    document: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    failed = [note for note in document.get("notes", []) if f"{kind} failed" in note]
    if failed:
        raise RuntimeError(f"`bench {scenario}` of {python}: {failed[0]} (log {log_path})")
    return document


def figures(scenario: str, kind: str, document: dict[str, Any]) -> dict[str, tuple[float, str]]:
    """The compared figures of one run: metric -> (value, which way is better)."""
    rows = document["rows"]
    found: dict[str, tuple[float, str]] = {}
    if scenario == "backlog":
        for row in rows:
            if row.get("backend") == kind:
                for key, (metric, better) in BACKLOG.items():
                    found[metric] = (float(row[key]), better)
    elif scenario == "rebalance":
        for row in rows:
            for key, (metric, better) in REBALANCE.items():
                found[f"rebalance {row['change']}: {metric}"] = (float(row[key]), better)
    elif scenario == "enqueue":
        for row in rows:
            if row.get("backend") != kind or str(row["side"]).startswith("raw"):
                continue
            found[f"enqueue {row['side']} / raw"] = (float(row["ratio_to_raw"]), HIGHER)
            if row["side"] == "schedule_task":
                found["enqueue schedule_task tasks/s"] = (float(row["tasks_per_s"]), HIGHER)
    else:
        raise ValueError(f"{scenario!r}: versus runs whole scenarios only of {SCENARIOS}")
    return found


def rounds(
    scenario: str, kind: str, pythons: dict[str, Path], options: BenchOptions
) -> dict[str, list[dict[str, tuple[float, str]]]]:
    """`options.repeat` rounds of `scenario` by every checkout, which goes first alternating."""
    names: Sequence[str] = list(pythons)
    runs: dict[str, list[dict[str, tuple[float, str]]]] = {name: [] for name in names}
    for n in range(options.repeat):
        for name in names if n % 2 == 0 else list(reversed(names)):
            document = run_once(pythons[name], scenario, kind, options, f"{name}-{n}")
            runs[name].append(figures(scenario, kind, document))
    return runs
