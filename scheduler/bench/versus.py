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

The ratios (this / baseline) are the result; the absolute figures only describe the minute.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

import click

from scheduler.bench.common import (
    DISTRIBUTED,
    EMBEDDED,
    BenchOptions,
    ScenarioResult,
    machine,
    median,
)

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


def measure(kind: str, options: BenchOptions, baseline: Path) -> dict[str, Any]:
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
        lagged = rounds(sides, options.repeat, op="lag", rate=offered, duration_s=duration_s)
        lag = {
            name: _medians(runs, "p50_ms", "p99_ms", "ran_per_s", "cpu_s_per_10k")
            for name, runs in lagged.items()
        }
    return {"tasks": count, "offered_per_s": offered, "execute": execute, "lag": lag}


def _ratio(this: float, base: float) -> float:
    return this / base if base else float("nan")


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
    probe = machine()
    result = ScenarioResult(
        "versus",
        details={"against": str(against), "baseline_python": str(baseline), "machine": probe},
    )
    click.echo(f"machine: {probe['cpu_model']}; sum(range(10**7)) took {probe['cpu_probe_ms']} ms")
    for kind in (EMBEDDED, DISTRIBUTED):
        if not options.wants(kind):
            continue
        try:
            measured = measure(kind, options, baseline)
        except Exception as error:  # a server restarted under us: keep the other backend's
            result.backend_failed(kind, error)
            continue
        result.details[kind] = measured
        execute, lag = measured["execute"], measured["lag"]
        offered = f"at {measured['offered_per_s']:,.0f}/s"
        for metric, values, key in (
            ("execute tasks/s", execute, "tasks_per_s"),
            ("worker CPU s per 10k tasks (execute)", execute, "cpu_s_per_10k"),
            (f"lag p50 ms {offered}", lag, "p50_ms"),
            (f"lag p99 ms {offered}", lag, "p99_ms"),
            (f"worker CPU s per 10k tasks (lag {offered})", lag, "cpu_s_per_10k"),
        ):
            target = next((t for m, t in TARGETS.items() if metric.startswith(m)), "")
            result.add(
                backend=kind,
                metric=metric,
                this=values[THIS][key],
                baseline=values[BASE][key],
                ratio=round(_ratio(values[THIS][key], values[BASE][key]), 3),
                target=target,
            )
    result.notes.append(
        "this = the running checkout, baseline = --against; medians of --repeat rounds taken in "
        "turn (A B, B A, ...). The machine is shared: the ratios are the result, the absolute "
        "figures only describe this run's minutes"
    )
    return result
