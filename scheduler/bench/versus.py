"""versus: this checkout against another one (a baseline commit) on the same machine, in one run.

Absolute rates differ threefold between machines of one kind, and on a shared machine from one
minute to the next, so a speed-up is measured as a ratio against a second checkout run side by
side: `git worktree add --detach ../base 4f977e1 && (cd ../base && bash scripts/setup.sh)`, then
`scheduler bench versus --against ../base`.

Per backend, each checkout gets its own backend (data dir or topic + keyspace) and one
`scheduler worker` of its own code, started through its own interpreter by
`scheduler/bench/versus_side.py`; both stay up for the whole run and take turns (A B, B A, ...):

* execute: N tasks due at once, enqueued in chunks of 1,000; tasks/s from the first enqueue to
  the last start (as `bench execute`), and the worker's CPU time over it, per 10,000 tasks;
* lag: a steady load at one offered rate for both, half the slower side's median execute rate,
  every task due 1 s after it is sent; p50/p99 of start - due, and the worker's CPU per 10,000.

backlog, rebalance (Kafka + Cassandra only) and enqueue start backends and workers of their own:
each checkout runs its own `scheduler bench <scenario>` in turn (`versus_runs`). Then, once per
checkout, the OS threads of an embedded worker owning 64 partitions (`versus_side.py threads`),
and the line count of the engine, worker and adapters of both checkouts (`lines`).

The ratios (this / baseline) are the result; the absolute figures only describe the minute. A
row is marked worse when the median is worse by more than `NOISE` and every run of this checkout
is worse than every run of the baseline (with one round, the first condition alone); a line
count is worse when it is larger at all.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

import click

from scheduler.bench import lines, versus_runs
from scheduler.bench.common import (
    DISTRIBUTED,
    EMBEDDED,
    BenchOptions,
    ScenarioResult,
    machine,
    median,
)
from scheduler.bench.versus_runs import HIGHER, LOWER

SIDE_SCRIPT = Path(__file__).with_name("versus_side.py")
PREFIX = "VERSUS "
AGAINST_ENV = "SCHEDULER_BENCH_AGAINST"
"""The baseline checkout (or its Python) when `--against` is not given (the CLI reads it)."""
LAG_LEVEL = 0.5
"""The offered rate of the lag runs, as a fraction of the slower side's execute rate."""
THIS = "this"
BASE = "baseline"
TARGETS = {
    "execute tasks/s": ">= 2",
    "lag p99 ms": "<= 0.5",
    "worker CPU s per 10k tasks (execute)": "<= 0.5",
}
SCENARIOS = ("execute", "lag", "backlog", "rebalance", "enqueue", "threads", "lines")
NOISE = 0.1
"""A ratio within 10 % of 1 is not called worse, whatever the runs."""
THREAD_TARGET = 150
"""Issue 40: at most this many threads in a worker owning 64 partitions."""


def interpreter(against: Path) -> Path:
    """The Python of a checkout (`DIR/.venv/bin/python`), or `against` itself if it is one."""
    if against.is_file():
        return against
    python = against / ".venv" / "bin" / "python"
    if not python.is_file():
        raise FileNotFoundError(
            f"{against}: no checkout with a venv there ({python} is missing); make one with "
            f"`git worktree add --detach {against} <commit>` and `bash scripts/setup.sh` in it, "
            f"or pass the baseline's Python as --against"
        )
    return python


class Side:
    """One checkout's side driver (`versus_side.py`) in a child process."""

    def __init__(self, name: str, python: Path, kind: str, scratch: Path) -> None:
        self.name = name
        directory = scratch / f"versus-{name}-{kind}"
        directory.mkdir(parents=True, exist_ok=True)
        self.log_path = directory / "side.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in close()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.process = subprocess.Popen(
            [str(python), "-P", str(SIDE_SCRIPT), kind, str(directory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
            cwd=directory,
        )
        self.ready = self._read()

    def ask(self, **request: Any) -> dict[str, Any]:
        stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        return self._read()

    def _read(self) -> dict[str, Any]:
        stdout: IO[str] = self.process.stdout  # type: ignore[assignment]
        for line in stdout:
            if line.startswith(PREFIX):
                answer: dict[str, Any] = json.loads(line[len(PREFIX) :])
                return answer
        self.process.wait(30)
        lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        errors = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b", line)]
        last = errors[-1] if errors else next((ln for ln in reversed(lines) if ln), "(no log)")
        tail = "\n".join(lines[-40:])
        raise RuntimeError(
            f"the {self.name} side exited ({self.process.returncode}): {last}; its log "
            f"{self.log_path} ends:\n{tail}"
        )

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                self._stop()
        finally:
            self._log.close()

    def _stop(self) -> None:
        stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
        try:
            stdin.write(json.dumps({"op": "stop"}) + "\n")
            stdin.close()
            self.process.wait(120)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait(30)


def rounds(sides: Sequence[Side], repeat: int, **request: Any) -> dict[str, list[dict[str, Any]]]:
    """`repeat` rounds of one request to every side, which side goes first alternating."""
    runs: dict[str, list[dict[str, Any]]] = {side.name: [] for side in sides}
    for n in range(repeat):
        order = list(sides) if n % 2 == 0 else list(reversed(sides))
        for side in order:
            runs[side.name].append(side.ask(**request))
    return runs


def _medians(runs: list[dict[str, Any]], *metrics: str) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for metric in metrics:
        values = [float(run[metric]) for run in runs]
        summary[metric] = median(values)
        summary[f"{metric}_runs"] = values
    return summary


def measure(kind: str, options: BenchOptions, baseline: Path, *, lag: bool) -> dict[str, Any]:
    count = options.pick(20_000, 500)
    duration_s = 2.0 if options.smoke else 10.0
    pythons = {THIS: Path(sys.executable), BASE: baseline}
    with ExitStack() as stack:
        sides = []
        for name, python in pythons.items():
            side = Side(name, python, kind, options.scratch)
            stack.callback(side.close)
            sides.append(side)
        executed = rounds(sides, options.repeat, op="execute", count=count)
        execute = {
            name: _medians(runs, "tasks_per_s", "cpu_s_per_10k", "lag_p99_ms")
            for name, runs in executed.items()
        }
        offered = LAG_LEVEL * min(values["tasks_per_s"] for values in execute.values())
        if not lag:
            return {"tasks": count, "execute": execute}
        lagged = rounds(sides, options.repeat, op="lag", rate=offered, duration_s=duration_s)
        steady = {
            name: _medians(runs, "p50_ms", "p99_ms", "ran_per_s", "cpu_s_per_10k")
            for name, runs in lagged.items()
        }
    return {"tasks": count, "offered_per_s": offered, "execute": execute, "lag": steady}


def worse(
    this: Sequence[float], base: Sequence[float], better: str, *, noise: float = NOISE
) -> bool:
    """Whether `this` is worse than `base` beyond `noise` (see the module's docstring)."""
    this = [value for value in this if not math.isnan(value)]
    base = [value for value in base if not math.isnan(value)]
    if not this or not base:
        return False
    ratio = _ratio(median(this), median(base))
    if better == HIGHER:
        return ratio < 1 - noise and max(this) < min(base)
    return ratio > 1 + noise and min(this) > max(base)


def _ratio(this: float, base: float) -> float:
    return this / base if base else float("nan")


def _add(
    result: ScenarioResult,
    backend: str,
    metric: str,
    this: Sequence[float],
    base: Sequence[float],
    better: str,
    target: str = "",
    *,
    noise: float = NOISE,
) -> None:
    # A run with nothing to measure (a rebalance that moved no partition) reads NaN: left out.
    this = [value for value in this if not math.isnan(value)]
    base = [value for value in base if not math.isnan(value)]
    result.add(
        backend=backend,
        metric=metric,
        this=median(this),
        baseline=median(base),
        ratio=round(_ratio(median(this), median(base)), 3),
        better=better,
        worse="WORSE" if worse(this, base, better, noise=noise) else "",
        target=target,
    )


def _execute_and_lag(
    result: ScenarioResult, kind: str, options: BenchOptions, baseline: Path, *, lag: bool
) -> None:
    measured = measure(kind, options, baseline, lag=lag)
    result.details[kind] = measured
    wanted = [
        ("execute tasks/s", "execute", "tasks_per_s", HIGHER),
        ("worker CPU s per 10k tasks (execute)", "execute", "cpu_s_per_10k", LOWER),
    ]
    if lag:
        offered = f"at {measured['offered_per_s']:,.0f}/s"
        wanted += [
            (f"lag p50 ms {offered}", "lag", "p50_ms", LOWER),
            (f"lag p99 ms {offered}", "lag", "p99_ms", LOWER),
            (f"worker CPU s per 10k tasks (lag {offered})", "lag", "cpu_s_per_10k", LOWER),
        ]
    for metric, scenario, key, better in wanted:
        values = measured[scenario]
        target = next((t for m, t in TARGETS.items() if metric.startswith(m)), "")
        this, base = values[THIS][f"{key}_runs"], values[BASE][f"{key}_runs"]
        _add(result, kind, metric, this, base, better, target)


def _whole(
    result: ScenarioResult, kind: str, scenario: str, pythons: dict[str, Path], opts: BenchOptions
) -> None:
    runs = versus_runs.rounds(scenario, kind, pythons, opts)
    result.details.setdefault(f"{kind} {scenario}", runs)
    for metric in runs[THIS][0]:
        if not all(metric in run for side in runs.values() for run in side):
            continue  # a figure one checkout does not report
        better = runs[THIS][0][metric][1]
        this = [run[metric][0] for run in runs[THIS]]
        base = [run[metric][0] for run in runs[BASE]]
        _add(result, kind, metric, this, base, better)


def thread_counts(python: Path, scratch: Path, name: str, *, smoke: bool) -> dict[str, Any]:
    """`versus_side.py threads` with one checkout's interpreter: its worker's thread counts."""
    directory = scratch / f"versus-threads-{name}"
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "side.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with log_path.open("ab") as log:
        completed = subprocess.run(
            [
                str(python),
                "-P",
                str(SIDE_SCRIPT),
                "threads",
                str(directory),
                *(["smoke"] if smoke else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            cwd=directory,
            timeout=900,
            check=False,
        )
    for line in completed.stdout.splitlines():
        if line.startswith(PREFIX):
            answer: dict[str, Any] = json.loads(line[len(PREFIX) :])
            return answer
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
    raise RuntimeError(
        f"the {name} side's thread count failed ({completed.returncode}); {log_path} ends:\n{tail}"
    )


def _threads(result: ScenarioResult, pythons: dict[str, Path], options: BenchOptions) -> None:
    counts = {
        name: thread_counts(python, options.scratch, name, smoke=options.smoke)
        for name, python in pythons.items()
    }
    result.details["threads"] = counts
    partitions = counts[THIS]["partitions"]
    for key, when in (("threads_idle", "idle"), ("threads_after_tasks", "idle after 2,000 tasks")):
        this, base = [float(counts[THIS][key])], [float(counts[BASE][key])]
        metric = f"worker threads, {partitions} partitions, {when}"
        _add(result, EMBEDDED, metric, this, base, LOWER, f"<= {THREAD_TARGET}")


def _lines(result: ScenarioResult, baseline: Path, against: Path) -> None:
    root = lines.checkout_of(against) or lines.checkout_of(baseline)
    if root is None:
        result.notes.append(f"no line count: {against} is no checkout nor its .venv's Python")
        return
    counts = {
        THIS: lines.count_checkout(Path(__file__).parents[2]),
        BASE: lines.count_checkout(root),
    }
    result.details["lines"] = counts
    for area in (*lines.AREAS, lines.TOTAL):
        for key, what in (("lines", "lines"), ("code", "code lines")):
            this, base = [float(counts[THIS][area][key])], [float(counts[BASE][area][key])]
            target = "smaller" if area == lines.TOTAL else ""
            # A count has no noise: any line more is more.
            _add(result, "-", f"{what} {area}", this, base, LOWER, target, noise=0.0)


def run(options: BenchOptions) -> ScenarioResult:
    against = options.against
    if against is None:
        raise click.UsageError(
            f"versus needs the baseline checkout: --against DIR (or ${AGAINST_ENV}), "
            "a worktree of the baseline commit with its own .venv"
        )
    try:
        baseline = interpreter(against)
    except FileNotFoundError as error:
        raise click.UsageError(str(error)) from None
    chosen = options.scenarios or SCENARIOS
    probe = machine()
    result = ScenarioResult(
        "versus",
        details={
            "against": str(against),
            "baseline_python": str(baseline),
            "machine": probe,
            "scenarios": list(chosen),
        },
    )
    click.echo(f"machine: {probe['cpu_model']}; sum(range(10**7)) took {probe['cpu_probe_ms']} ms")
    pythons = {THIS: Path(sys.executable), BASE: baseline}
    for kind in (EMBEDDED, DISTRIBUTED):
        if not options.wants(kind):
            continue
        try:  # a server restarted under us: keep the other figures
            if "execute" in chosen or "lag" in chosen:
                _execute_and_lag(result, kind, options, baseline, lag="lag" in chosen)
        except Exception as error:
            result.backend_failed(kind, error)
        for scenario in versus_runs.SCENARIOS:
            if scenario not in chosen or (scenario == "rebalance" and kind != DISTRIBUTED):
                continue
            try:
                _whole(result, kind, scenario, pythons, options)
            except Exception as error:
                result.backend_failed(kind, error)
    if "threads" in chosen:
        _threads(result, pythons, options)
    if "lines" in chosen:
        _lines(result, baseline, against)
    result.notes.append(
        "this = the running checkout, baseline = --against; medians of --repeat rounds taken in "
        "turn (A B, B A, ...). The machine is shared: the ratios are the result, the absolute "
        f"figures only describe this run's minutes. WORSE: worse by more than {NOISE:.0%} and "
        "every run of this worse than every run of the baseline"
    )
    return result
