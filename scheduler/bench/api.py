"""api: the REST API's listings over a large store, and its batch POST beside `schedule_tasks`
(issue 44).

Measured, against a `scheduler api` process (uvicorn, as users start it) on a fresh backend:

* listings, a page of 100, one request at a time from this process over a kept-alive
  connection: requests/s and p50/p99 latency of
  - `GET /api/v1/tasks` walking the whole store page by page with `next_cursor`;
  - `GET /api/v1/tasks?ordering_id=...` of random ordering ids (one partition read);
  - `GET /api/v1/schedules` walking page by page with `after`, and with a status filter;
  with N task rows (default 1,000,000, `--size`; 2,000 with --smoke) and N/10 schedules
  (100,000) in the store. Target: p99 < 100 ms.
* `POST /api/v1/tasks/batch` of 1,000 tasks a request against `schedule_tasks` called in this
  process with the same batches on the same log (taking turns batch by batch, medians of
  `--repeat` runs): tasks/s, and the ratio. Target: >= 0.5.

The rows are written straight through the store's port (`write_tasks`, `ScheduleStore.put`),
not through a worker: what is measured is reading them. Tasks are pending (scheduled a year
ahead), over 10,000 ordering ids; schedules are disabled cron schedules. `--backends
kafka-cassandra` measures Kafka + Cassandra at the usual settings' addresses (a fresh topic and
keyspace, dropped after).
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from statistics import median
from typing import Any

from scheduler.bench.common import (
    BenchOptions,
    ScenarioResult,
    Stopwatch,
    now_ms,
    percentile,
    rate,
)
from scheduler.bench.workers import Backend, backend, run_settings

PAGE = 100
ORDERING_IDS = 10_000
POST_BATCH = 1_000
TARGET_P99_MS = 100.0
TARGET_POST_RATIO = 0.5
WRITE_BATCH = 5_000


def _requests(count: int, send: Callable[[], Any]) -> dict[str, float]:
    """Call `send` `count` times; requests/s and latency percentiles (ms)."""
    latencies: list[float] = []
    started = time.perf_counter()
    for _ in range(count):
        before = time.perf_counter()
        send()
        latencies.append((time.perf_counter() - before) * 1000)
    total = time.perf_counter() - started
    return {
        "requests": count,
        "per_s": rate(count, total),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "max_ms": max(latencies, default=math.nan),
    }


# -- filling the store -------------------------------------------------------------------------


def _fill_tasks(settings: Any, count: int) -> float:
    """`count` pending tasks over `ORDERING_IDS` ordering ids, written with `write_tasks`; the
    seconds it took."""
    from scheduler.admin import partition_of
    from scheduler.model import Task
    from scheduler.runtime import open_store

    store = open_store(settings, create_schema=True)
    base = datetime.now(UTC) + timedelta(days=365)
    by_partition: dict[int, list[Task]] = {}
    with Stopwatch() as watch:
        try:
            with ThreadPoolExecutor(4 if settings.store == "cassandra" else 1) as pool:
                pending = []
                for n in range(count):
                    ordering_id = f"bench-{n % ORDERING_IDS:05d}"
                    task = Task(
                        ordering_id, base + timedelta(seconds=n // ORDERING_IDS), f"u{n}", {}
                    )
                    partition = partition_of(ordering_id, settings.partitions)
                    rows = by_partition.setdefault(partition, [])
                    rows.append(task)
                    if len(rows) >= WRITE_BATCH:
                        pending.append(pool.submit(store.write_tasks, partition, rows))
                        by_partition[partition] = []
                for partition, rows in by_partition.items():
                    if rows:
                        pending.append(pool.submit(store.write_tasks, partition, rows))
                for future in pending:
                    future.result()
        finally:
            store.close()
    return watch.seconds


def _fill_schedules(settings: Any, count: int) -> float:
    """`count` disabled cron schedules, written with `ScheduleStore.put`; the seconds."""
    from scheduler.runtime import open_store
    from scheduler.schedules.abc import ScheduleRecord
    from scheduler.schedules.model import Schedule, Time
    from scheduler.schedules.runtime import open_schedule_store

    store = open_store(settings, create_schema=True)
    schedules = open_schedule_store(settings, store, create_schema=True)
    at = now_ms()
    daily = Time.model_validate({"cronExpression": "0 3 * * *"})

    def put(n: int) -> None:
        schedule = Schedule(name=f"bench-{n:07d}", program="bench", trigger=daily)
        schedules.put(ScheduleRecord(schedule, revision=1, created_ms=at, updated_ms=at))

    with Stopwatch() as watch:
        try:
            with ThreadPoolExecutor(8 if settings.store == "cassandra" else 1) as pool:
                for _ in pool.map(put, range(count)):
                    pass
        finally:
            schedules.close()
            store.close()
    return watch.seconds


# -- the API process ---------------------------------------------------------------------------


@contextmanager
def _api(run: Backend) -> Iterator[tuple[Any, Any]]:
    """`scheduler api` on a free port with an admin token; an httpx client on it, and the
    process."""
    import httpx

    from scheduler.api.auth import Role, TokenFile
    from scheduler.bench.servers import free_port

    tokens = run.directory / "api-tokens.json"
    token = TokenFile(tokens).create(Role.ADMIN, "bench")
    port = free_port()
    log = open(run.directory / "api.log", "ab")  # noqa: SIM115 - closed below
    env = {
        **os.environ,
        **run.env,
        "SCHEDULER_API_TOKENS_FILE": str(tokens),
        "SCHEDULER_LOG_LEVEL": "WARNING",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from scheduler.cli.main import cli; cli()",
            "api",
            "--port",
            str(port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    client.get("/api/v1/health").raise_for_status()
                    break
                except httpx.TransportError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"scheduler api did not start; see {run.directory / 'api.log'}"
                        ) from None
                    time.sleep(0.2)
            yield client, process
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _ok(answer: Any) -> Any:
    if answer.status_code >= 300:
        raise RuntimeError(f"{answer.request.method} {answer.request.url}: {answer.text[:300]}")
    return answer.json()


# -- the measured sides ------------------------------------------------------------------------


def _listings(
    client: Any, count: int, schedules: int, requests: int, failed: list[str]
) -> dict[str, dict[str, Any]]:
    """Each listing's requests/s and latency; a listing that fails is named in `failed` (with
    its error) and the others are still measured."""
    found: dict[str, dict[str, Any]] = {}
    cursor: list[str | None] = [None]

    def measure(name: str, times: int, send: Callable[[], None]) -> None:
        try:
            found[name] = _requests(times, send)
        except Exception as error:
            failed.append(f"GET {name} failed: {str(error)[:300]}")

    def task_page() -> None:
        params: dict[str, Any] = {"limit": PAGE}
        if cursor[0] is not None:
            params["cursor"] = cursor[0]
        page = _ok(client.get("/api/v1/tasks", params=params))
        assert len(page["tasks"]) == PAGE or page["next_cursor"] is None
        cursor[0] = page["next_cursor"]

    measure("tasks, every partition, next_cursor", min(requests, max(1, count // PAGE)), task_page)
    chooser = random.Random(44)
    per_id = max(1, count // ORDERING_IDS)

    def by_ordering_id() -> None:
        ordering_id = f"bench-{chooser.randrange(min(count, ORDERING_IDS)):05d}"
        page = _ok(client.get("/api/v1/tasks", params={"ordering_id": ordering_id, "limit": PAGE}))
        assert len(page["tasks"]) == min(PAGE, per_id), len(page["tasks"])

    measure("tasks of one ordering id", requests, by_ordering_id)
    after = [""]

    def schedule_page(status: str | None) -> Callable[[], None]:
        def send() -> None:
            params: dict[str, Any] = {"limit": PAGE, "after": after[0]}
            if status is not None:
                params["status"] = status
            page = _ok(client.get("/api/v1/schedules", params=params))
            after[0] = page[-1]["name"] if len(page) == PAGE else ""

        return send

    pages = min(requests, max(1, schedules // PAGE))
    measure("schedules, by name, after", pages, schedule_page(None))
    after[0] = ""
    measure("schedules, DISABLED, after", pages, schedule_page("DISABLED"))
    return found


def _posts(client: Any, settings: Any, total: int, repeat: int) -> dict[str, dict[str, Any]]:
    """POST /api/v1/tasks/batch vs schedule_tasks, `total` tasks in batches of POST_BATCH.

    Each side's work is made before the clocks start: the direct side's `Task`s, the API side's
    bodies (JSON bytes, as a client holding its own JSON sends them). The sides take turns batch
    by batch (the first one alternating), so that a change in the machine's load over a run
    falls on both alike; `repeat` runs, medians."""
    import orjson

    from scheduler.model import Task
    from scheduler.runtime import connect

    producer = connect(settings)
    headers = {"content-type": "application/json"}
    runs: dict[str, list[float]] = {"api": [], "direct": []}

    def batches(side: str, run: int) -> list[list[Task]]:
        due = datetime.now(UTC) + timedelta(days=400)
        return [
            [
                Task(f"post-{side}-{i % 1000}", due, f"r{run}-{first + i}", {"n": i})
                for i in range(min(POST_BATCH, total - first))
            ]
            for first in range(0, total, POST_BATCH)
        ]

    def body(batch: list[Task]) -> bytes:
        return orjson.dumps(
            {
                "tasks": [
                    {
                        "ordering_id": t.ordering_id,
                        "scheduled_time": t.scheduled_time.isoformat(),
                        "uniqueness_key": t.uniqueness_key,
                        "data": t.data,
                    }
                    for t in batch
                ]
            }
        )

    def post(content: bytes) -> float:
        started = time.perf_counter()
        _ok(client.post("/api/v1/tasks/batch", content=content, headers=headers))
        return time.perf_counter() - started

    def send(batch: list[Task]) -> float:
        started = time.perf_counter()
        producer.schedule_tasks(batch).result(120)
        return time.perf_counter() - started

    try:
        for run in range(repeat):
            bodies = [body(batch) for batch in batches("api", run)]
            work = batches("direct", run)
            spent = {"api": 0.0, "direct": 0.0}
            for n, (content, batch) in enumerate(zip(bodies, work, strict=True)):
                if n % 2:
                    spent["direct"] += send(batch)
                    spent["api"] += post(content)
                else:
                    spent["api"] += post(content)
                    spent["direct"] += send(batch)
            for side, seconds in spent.items():
                runs[side].append(rate(total, seconds))
    finally:
        producer.close()
    return {
        side: {"tasks_per_s": median(rates), "tasks_per_s_runs": rates}
        for side, rates in runs.items()
    }


def _one_backend(options: BenchOptions, kind: str, result: ScenarioResult) -> dict[str, Any]:
    count = options.pick(1_000_000, 2_000)
    schedules = max(1, count // 10)
    requests = 20 if options.smoke else 500
    posted = 2 * POST_BATCH if options.smoke else 50 * POST_BATCH
    with backend(kind, options, "api", executor="noop") as run:
        settings = run_settings(run)
        fill_tasks_s = _fill_tasks(settings, count)
        fill_schedules_s = _fill_schedules(settings, schedules)
        with _api(run) as (client, _process):
            failed: list[str] = []
            listings = _listings(client, count, schedules, requests, failed)
            posts = _posts(client, settings, posted, options.repeat)
    result.notes += [f"{kind}: {failure}" for failure in failed]
    for name, measured in listings.items():
        result.add(
            backend=kind,
            case=f"GET {name}",
            rows=count if name.startswith("tasks") else schedules,
            requests=measured["requests"],
            per_s=round(measured["per_s"], 1),
            p50_ms=round(measured["p50_ms"], 1),
            p99_ms=round(measured["p99_ms"], 1),
            target="p99 < 100 ms",
            met="yes" if measured["p99_ms"] < TARGET_P99_MS else "no",
        )
    ratio = posts["api"]["tasks_per_s"] / posts["direct"]["tasks_per_s"]
    result.add(
        backend=kind,
        case=f"POST /api/v1/tasks/batch ({POST_BATCH} a request)",
        rows=posted,
        tasks_per_s=round(posts["api"]["tasks_per_s"]),
    )
    result.add(
        backend=kind,
        case=f"schedule_tasks ({POST_BATCH} a call)",
        rows=posted,
        tasks_per_s=round(posts["direct"]["tasks_per_s"]),
        ratio=round(ratio, 2),
        target=">= 0.5",
        met="yes" if ratio >= TARGET_POST_RATIO else "no",
    )
    return {
        "tasks": count,
        "schedules": schedules,
        "fill_tasks_s": round(fill_tasks_s, 1),
        "fill_schedules_s": round(fill_schedules_s, 1),
        "listings": listings,
        "posts": posts,
        "post_ratio": ratio,
    }


def run(options: BenchOptions) -> ScenarioResult:
    result = ScenarioResult("api")
    for kind in options.backends:
        try:
            result.details[kind] = _one_backend(options, kind, result)
        except Exception as error:  # the other backend's numbers are still worth having
            if len(options.backends) == 1:
                raise
            result.backend_failed(kind, error)
    result.details.update(cpus=os.cpu_count(), load_average=os.getloadavg())
    result.notes.append(
        "listings: one request at a time over one kept-alive connection, a page of 100; "
        "the client (this process) and the API process share the machine's cores"
    )
    missed = [row["case"] for row in result.rows if row.get("met") == "no"]
    if missed:
        result.notes.append(f"missed the target: {', '.join(missed)}")
    return result
