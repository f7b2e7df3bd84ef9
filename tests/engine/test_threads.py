"""The engine's threads: two per owned partition, the pool's, and a few per worker."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from scheduler.embedded import EmbeddedScheduler
from scheduler.engine.settings import EngineSettings

PARTITIONS = 64
#: The worker's own: its poll loop, the TopicSupervisor, the TimerService and the log's.
PER_WORKER = 6


def test_a_worker_owning_64_partitions_runs_two_threads_per_partition_and_its_pool(
    data_dir: Path,
) -> None:
    settings = EngineSettings(pool_size=8)
    before = threading.active_count()
    with EmbeddedScheduler(
        data_dir=data_dir,
        executor=lambda task, context: None,
        partitions=PARTITIONS,
        settings=settings,
    ) as embedded:
        deadline = time.monotonic() + 60
        while len(embedded.worker.owned_partitions()) < PARTITIONS:
            assert time.monotonic() < deadline, "the worker never owned every partition"
            time.sleep(0.05)
        started = threading.active_count() - before
    assert started <= 2 * PARTITIONS + settings.pool_size + PER_WORKER  # 142: issue 40 asks 150
