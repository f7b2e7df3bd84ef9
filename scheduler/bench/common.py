"""What every scenario shares: the run's options, timing, A/B alternation, percentiles, RSS
sampling of a child process, and the JSON + table output.

These machines are noisy, so a comparison is never two separate runs: `alternate` runs the sides
in turn, flipping which goes first on every repetition, and reports each side's median.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

EMBEDDED = "embedded"
DISTRIBUTED = "kafka-cassandra"
BACKENDS = (EMBEDDED, DISTRIBUTED)


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchOptions:
    """The options of one `scheduler bench` invocation."""

    size: int | None
    """Tasks (or rows, runs) per repetition; None: the scenario's default (or smoke) size."""
    repeat: int
    """Repetitions of each side of a comparison; medians are reported."""
    smoke: bool
    """Tiny sizes: proves the command works, measures nothing."""
    out: Path
    """Directory of the JSON results."""
    backends: tuple[str, ...]
    """`embedded` and/or `kafka-cassandra`."""
    settings: Any
    """`scheduler.settings.Settings`: Kafka and Cassandra addresses (SCHEDULER_*)."""
    scratch: Path
    """Where scenarios put their data directories and worker logs."""
    data_bytes: int = 0
    """enqueue: characters of text in each task's data (0: empty data, the smallest record)."""
    peers: tuple[str, ...] = ()
    """peer: the groups of sides to run (`scheduler.bench.peer.GROUPS`); empty: all."""
    backlog: int | None = None
    """peer: tasks in workload (c), due over the next day; None: the scenario's default."""
    against: Path | None = None
    """versus: the baseline checkout (its `.venv/bin/python` runs its side) or its Python."""
    scenarios: tuple[str, ...] = ()
    """versus: what to compare (`scheduler.bench.versus.SCENARIOS`); empty: all of it."""
    config: Path | None = None
    """The settings file the bench read (`--config` or `$SCHEDULER_CONFIG`): the workers it
    starts read it too, so security settings given only there reach them."""

    def pick(self, default: int, smoke: int) -> int:
        """The size to use: `--size`, else the smoke or the full default."""
        if self.size is not None:
            return self.size
        return smoke if self.smoke else default

    def wants(self, backend: str) -> bool:
        return backend in self.backends


# -- timing and statistics ----------------------------------------------------------------------


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0..100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def lag_summary(lags_ms: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max of firing lags (ms), and how many there were."""
    return {
        "count": len(lags_ms),
        "p50_ms": percentile(lags_ms, 50),
        "p99_ms": percentile(lags_ms, 99),
        "max_ms": max(lags_ms) if lags_ms else math.nan,
    }


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def alternate(
    sides: Mapping[str, Callable[[], Mapping[str, Any]]], repeat: int
) -> dict[str, dict[str, Any]]:
    """Run every side `repeat` times, in turn, rotating which goes first; medians per side.

    Each side returns a flat mapping of numbers (a rate, a time); the result holds, per side,
    the median of each number (`<name>`) and every repetition's value (`<name>_runs`).
    """
    runs: dict[str, list[Mapping[str, Any]]] = {name: [] for name in sides}
    names = list(sides)
    for n in range(repeat):
        shift = n % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(sides[name]())
    result: dict[str, dict[str, Any]] = {}
    for name, results in runs.items():
        summary: dict[str, Any] = {}
        for metric in results[0]:
            values = [r[metric] for r in results]
            if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                summary[metric] = median(values)
                summary[f"{metric}_runs"] = values
            else:
                summary[metric] = values[-1]
        result[name] = summary
    return result


class Stopwatch:
    """`with Stopwatch() as watch: ...; watch.seconds`."""

    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started


# -- memory --------------------------------------------------------------------------------------


class RssSampler:
    """Samples the resident memory of a process (with its children, unless `children` is
    False) on a daemon thread."""

    def __init__(self, pid: int, interval_s: float = 0.1, *, children: bool = True) -> None:
        import psutil

        self._process = psutil.Process(pid)
        self._children = children
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.samples: list[tuple[float, int]] = []
        """(seconds since start, bytes) pairs."""
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mb(self) -> float:
        return max((rss for _, rss in self.samples), default=0) / 2**20

    def latest_mb(self) -> float:
        return self.samples[-1][1] / 2**20 if self.samples else math.nan

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                rss = self._process.memory_info().rss
                if self._children:
                    children = self._process.children(recursive=True)
                    rss += sum(c.memory_info().rss for c in children)
            except psutil.Error:
                return
            self.samples.append((time.monotonic() - self._started, rss))
            self._stop.wait(self._interval_s)


# -- output --------------------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    """What a scenario measured: rows for the table, and everything else for the JSON."""

    scenario: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    """One row per measured case; the keys are the table's columns."""
    details: dict[str, Any] = field(default_factory=dict)
    """Sizes, settings, per-repetition values, notes."""
    notes: list[str] = field(default_factory=list)
    """Caveats shown under the table (N/A reasons, what limits a number)."""

    def add(self, **row: Any) -> None:
        self.rows.append(row)

    def backend_failed(self, backend: str, error: BaseException) -> None:
        """Note a backend that could not be measured (a server restarted under us), so that
        the scenario still reports the other backend."""
        self.notes.append(f"{backend} failed: {type(error).__name__}: {str(error)[:300]}")


def machine() -> dict[str, Any]:
    """The CPU model and a one-line speed probe: ms for `sum(range(10**7))` in this Python."""
    model = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    started = time.perf_counter()
    sum(range(10**7))
    return {"cpu_model": model, "cpu_probe_ms": round((time.perf_counter() - started) * 1000, 1)}


def environment() -> dict[str, Any]:
    """Where and when the numbers were taken."""
    import psutil

    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        **machine(),
    }


def write_result(result: ScenarioResult, options: BenchOptions) -> Path:
    """Print the table and write `<out>/<scenario>.json`; the JSON's path."""
    options.out.mkdir(parents=True, exist_ok=True)
    document = {
        "scenario": result.scenario,
        "smoke": options.smoke,
        "repeat": options.repeat,
        "backends": list(options.backends),
        "environment": environment(),
        "rows": result.rows,
        "details": result.details,
        "notes": result.notes,
    }
    path = options.out / f"{result.scenario}.json"
    path.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
    click.echo(format_table(result))
    click.echo(f"-> {path}\n")
    return path


def format_table(result: ScenarioResult) -> str:
    """The rows as a fixed-width table, with the notes below it."""
    lines = [f"== {result.scenario} =="]
    if result.rows:
        columns = list(dict.fromkeys(key for row in result.rows for key in row))
        cells = [[_cell(row.get(column)) for column in columns] for row in result.rows]
        widths = [
            max(len(column), *(len(row[i]) for row in cells)) for i, column in enumerate(columns)
        ]
        lines.append("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
        lines.append("  ".join("-" * w for w in widths))
        for row in cells:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan
