"""Prometheus metrics of programs and runs (served with the engine's, on the worker's port)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

RUNS_LAUNCHED = Counter(
    "scheduler_runs_launched_total", "Runs written PENDING by a launch (a request launches once)."
)
LAUNCHES_REFUSED = Counter(
    "scheduler_launches_refused_total", "Launch requests refused at their concurrency limit."
)
RUNS_ENDED = Counter(
    "scheduler_runs_ended_total", "Runs that reached a terminal status, by status.", ["status"]
)
LAUNCH_LATENCY = Histogram(
    "scheduler_run_launch_latency_seconds",
    "From a launch request's time (a fire's logical time, an operator's request) to the run's "
    "first start.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
