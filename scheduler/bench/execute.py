"""execute: end-to-end no-op tasks per second, one worker and two, embedded and Kafka+Cassandra.

The bench process is the producer; workers are `scheduler worker` subprocesses running the
probe executor (`scheduler.bench.probe`). One repetition enqueues N tasks, due the moment they
are created, in chunks of 1,000 through `schedule_tasks`, and waits until the probe has seen N
starts. The rate is N over the time from the first enqueue to the last start: enqueue, log,
persist, load, dispatch and run, all included.

Both fleets of a backend (one worker, two workers) run at once, on separate topics, so that the
repetitions alternate between them; the idle fleet's polling costs a little CPU meanwhile.
Two workers on the embedded backend are two `Worker` objects in one process (the embedded log
admits one worker process per group), so they share one interpreter and its GIL.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from scheduler.bench.common import (
    DISTRIBUTED,
    EMBEDDED,
    BenchOptions,
    ScenarioResult,
    alternate,
    lag_summary,
    now_ms,
    rate,
)
from scheduler.bench.enqueue import make_tasks
from scheduler.bench.probe import read_probe, wait_for_count
from scheduler.bench.workers import Backend, backend

CHUNK = 1000


def drive(run: Backend, client: Any, count: int, label: str) -> dict[str, float]:
    """Enqueue `count` tasks due now and wait until all started; rate and lags."""
    before = len(read_probe(run.probe))
    started = now_ms()
    futures = []
    for n in range(0, count, CHUNK):
        chunk = make_tasks(min(CHUNK, count - n), due_ms=now_ms(), prefix=f"{label}-{n}")
        futures.append(client.schedule_tasks(chunk))
    for future in futures:
        future.result(300)
    enqueued = now_ms()
    alive = lambda: all(w.alive for w in run.workers)  # noqa: E731
    reached = wait_for_count(
        run.probe, before + count, timeout_s=max(120, count / 200), alive=alive
    )
    if reached < before + count:
        raise TimeoutError(f"{reached - before} of {count} tasks ran in time ({run.directory})")
    records = read_probe(run.probe)[before:]
    last = max(start for _, start in records)
    lags = [start - scheduled for scheduled, start in records]
    return {
        "tasks_per_s": rate(count, (last - started) / 1000),
        "enqueue_s": (enqueued - started) / 1000,
        **{f"lag_{k}": v for k, v in lag_summary(lags).items() if k != "count"},
    }


def fleet(stack: ExitStack, kind: str, options: BenchOptions, workers: int) -> Backend:
    run = stack.enter_context(backend(kind, options, f"execute{workers}"))
    if kind == EMBEDDED and workers == 2:
        run.start_worker("twin", twin=True)
    else:
        for n in range(workers):
            run.start_worker(f"worker{n}")
    run.wait_assigned()
    return run


def measure(kind: str, options: BenchOptions, count: int) -> dict[str, dict[str, Any]]:
    from scheduler.client import SchedulerClient

    with ExitStack() as stack:
        sides: dict[str, Callable[[], dict[str, float]]] = {}
        for workers in (1, 2):
            run = fleet(stack, kind, options, workers)
            client = SchedulerClient(log=run.log)
            stack.callback(client.close)
            drive(run, client, min(count, 2000), f"warm{workers}")  # imports, JIT, caches
            sides[f"{workers} worker{'s' * (workers > 1)}"] = _side(run, client, count, workers)
        return alternate(sides, options.repeat)


def _side(run: Backend, client: Any, count: int, workers: int) -> Callable[[], dict[str, float]]:
    counter = iter(range(10**6))
    return lambda: drive(run, client, count, f"w{workers}r{next(counter)}")


def run(options: BenchOptions) -> ScenarioResult:
    count = options.pick(30_000, 1_000)
    result = ScenarioResult("execute", details={"tasks": count})
    for kind in (EMBEDDED, DISTRIBUTED):
        if not options.wants(kind):
            continue
        try:
            measured = measure(kind, options, count)
        except Exception as error:  # a server restarted under us: keep the other backend's
            result.backend_failed(kind, error)
            continue
        result.details[kind] = measured
        for side, values in measured.items():
            result.add(
                backend=kind,
                workers=side,
                tasks_per_s=values["tasks_per_s"],
                enqueue_s=values["enqueue_s"],
                lag_p50_ms=values["lag_p50_ms"],
                lag_p99_ms=values["lag_p99_ms"],
            )
    result.notes.append(
        "embedded '2 workers' = two Worker objects in one process (one GIL); issue 2's target "
        "is >= 5,000 tasks/s for one embedded worker process"
    )
    return result
