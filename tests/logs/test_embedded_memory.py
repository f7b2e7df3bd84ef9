"""The embedded log keeps fresh records in memory (its tail): at their own size."""

from __future__ import annotations

import tracemalloc

from scheduler.client import SchedulerClient
from scheduler.logs.embedded import EmbeddedTaskLog
from scheduler.model import Task
from tests.engine.helpers import soon


def test_records_kept_in_the_tail_take_their_own_size(tmp_path) -> None:
    """orjson hands back a record in its whole output buffer, about 4 KB; kept as such, the tail's
    100,000 records took 400 MB in a process that both enqueues and runs tasks
    (`EmbeddedScheduler`). tracemalloc counts what stays allocated: exact, not timed."""
    log = EmbeddedTaskLog(path=str(tmp_path / "log.db"), topic="t")
    log.ensure_topic(4)
    client = SchedulerClient(log=log)
    due = soon(3_600_000)
    tracemalloc.start()
    try:
        for n in range(2000):
            client.schedule_task(Task(f"o-{n % 10}", due, f"k-{n}"))
        assert client.flush(30) == 0
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        client.close()
        log.close()
    assert sum(len(state.tail) for state in log.partitions) == 2000
    assert kept < 2000 * 1000  # about 300 bytes a record; 4 KB each before
