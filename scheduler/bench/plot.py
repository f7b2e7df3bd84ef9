"""Turn the scenarios' JSON into PNGs: throughput bars, lag against rate, RSS during a drain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _load(out: Path, name: str) -> dict[str, Any] | None:
    path = out / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _bars(
    rows: list[dict[str, Any]], label: Any, value: str, title: str, path: Path, log: bool = False
) -> Path:
    import matplotlib.pyplot as plt

    labels = [label(row) for row in rows]
    values = [row[value] or 0 for row in rows]
    figure, axes = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.5))
    bars = axes.barh(labels, values, color="#4878a8")
    axes.bar_label(bars, labels=[f"{v:,.0f}" for v in values], padding=3, fontsize=8)
    axes.invert_yaxis()
    if log:
        axes.set_xscale("log")
    axes.set_xlabel(value.replace("_", " "))
    axes.set_title(title)
    axes.margins(x=0.2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot_all(out: Path, to: Path) -> list[Path]:
    """Every plot whose scenario has a JSON in `out`; the PNGs written to `to`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    to.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if (doc := _load(out, "enqueue")) is not None:
        written.append(
            _bars(
                doc["rows"],
                lambda r: f"{r['backend']}: {r['side']}",
                "tasks_per_s",
                "enqueue: tasks/s (median)",
                to / "enqueue.png",
            )
        )
    if (doc := _load(out, "persist")) is not None and doc["rows"]:
        written.append(
            _bars(
                doc["rows"],
                lambda r: r["side"],
                "rows_per_s",
                "persist to Cassandra: rows/s (median)",
                to / "persist.png",
            )
        )
    if (doc := _load(out, "execute")) is not None:
        written.append(
            _bars(
                doc["rows"],
                lambda r: f"{r['backend']}: {r['workers']}",
                "tasks_per_s",
                "execute: end-to-end no-op tasks/s (median)",
                to / "execute.png",
            )
        )
    if (doc := _load(out, "peer")) is not None and doc["rows"]:
        rows = doc["rows"]
        written.append(
            _bars(
                rows,
                lambda r: r["side"],
                "a_tasks_per_s",
                "peer (a): N tasks due at once, tasks/s (log scale)",
                to / "peer-throughput.png",
                log=True,
            )
        )
        top = [key for key in rows[0] if key.startswith("b") and key.endswith("_p99_ms")][-1]
        written.append(
            _bars(
                rows,
                lambda r: r["side"],
                top,
                f"peer (b): p99 firing lag at {top[1:3]} % of each side's maximum, ms (log)",
                to / "peer-lag.png",
                log=True,
            )
        )
    if (doc := _load(out, "lag")) is not None:
        figure, axes = plt.subplots(figsize=(7, 4))
        for backend in dict.fromkeys(row["backend"] for row in doc["rows"]):
            rows = sorted(
                (row for row in doc["rows"] if row["backend"] == backend),
                key=lambda row: row["offered_per_s"],
            )
            rates = [row["offered_per_s"] for row in rows]
            for metric, style in (("p50_ms", "o-"), ("p99_ms", "s--"), ("max_ms", "^:")):
                axes.plot(
                    rates, [row[metric] for row in rows], style, label=f"{backend} {metric[:-3]}"
                )
        axes.set_xlabel("offered rate, tasks/s (25/50/90 % of the measured maximum, and 2,500)")
        axes.set_ylabel("firing lag, ms")
        axes.set_yscale("log")
        axes.axhline(50, color="grey", linewidth=0.8)
        axes.set_title("firing lag against rate")
        axes.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(to / "lag.png", dpi=110)
        plt.close(figure)
        written.append(to / "lag.png")
    if (doc := _load(out, "backlog")) is not None:
        figure, axes = plt.subplots(figsize=(7, 4))
        for backend, values in doc["details"].items():
            if isinstance(values, dict) and values.get("rss_timeline"):
                times, rss = zip(*values["rss_timeline"], strict=True)
                axes.plot(times, rss, label=f"{backend}: {values['tasks']:,} tasks")
        axes.axhline(500, color="grey", linewidth=0.8, label="500 MB target")
        axes.set_xlabel("seconds since the worker process started")
        axes.set_ylabel("RSS, MB")
        axes.set_title("backlog drain: resident memory of the worker process")
        axes.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(to / "backlog-rss.png", dpi=110)
        plt.close(figure)
        written.append(to / "backlog-rss.png")
    return written
