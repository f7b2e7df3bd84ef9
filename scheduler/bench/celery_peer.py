"""Celery's side of `scheduler bench peer`: the app its `celery worker` subprocess loads.

`BENCH_CELERY_BROKER` is the private Redis; each task appends to `<BENCH_CELERY_SINK>.<pid>`
with one write: "n due_ms start_ms" for (a)-(c), "n start_ms" for (d) (`SCHEDULER_BENCH_SINK`).
Celery's defaults otherwise, as a user starts it: early acknowledgement, prefork pool.

The documented caveat (Celery's Redis broker guide, "Visibility timeout"): an `eta` task is
fetched by a worker at once and held unacknowledged until it is due; if it is not acknowledged
within the visibility timeout (1 hour by default), Redis redelivers it to another worker, so a
task due further out than that runs more than once unless the timeout is raised above the
longest eta; a worker that dies holding such tasks gives them back only after that timeout.
"""

from __future__ import annotations

import os

from celery import Celery

from scheduler.bench.common import now_ms
from scheduler.bench.peers import SINK_ENV, sink_record

app = Celery("bench", broker=os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)


@app.task(name="bench.noop", ignore_result=True)
def noop(n: int, due_ms: int) -> None:
    line = f"{n} {due_ms} {now_ms()}\n".encode()
    fd = os.open(
        f"{os.environ['BENCH_CELERY_SINK']}.{os.getpid()}", os.O_WRONLY | os.O_APPEND | os.O_CREAT
    )
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@app.task(name="bench.sink", ignore_result=True)
def sink(task_id: str) -> None:
    if SINK_ENV in os.environ:
        sink_record(task_id)
