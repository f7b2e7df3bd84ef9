"""A worker process for the crash test: `python -m tests.engine.crash_child DATA_DIR OUT MODE N`.

MODE `enqueue` schedules N tasks, prints ACCEPTED once every future resolved, then keeps
working until killed. MODE `drain` works until idle, then prints IDLE and exits.
Every execution appends the task's uniqueness key to OUT (O_APPEND: survives kill -9).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime, timedelta

from scheduler import Task
from scheduler.embedded import EmbeddedScheduler
from scheduler.engine.settings import EngineSettings


def main() -> None:
    data_dir, out, mode, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def executor(task, context):
        time.sleep(0.005)
        os.write(fd, f"{task.uniqueness_key}\n".encode())

    settings = EngineSettings(pool_size=2)
    with EmbeddedScheduler(
        data_dir=data_dir, executor=executor, partitions=4, settings=settings
    ) as s:
        if mode == "enqueue":
            start = datetime.now(UTC)
            futures = [
                s.client.schedule_task(
                    Task(f"o{i % 7}", start + timedelta(milliseconds=3 * i), f"task-{i:05d}")
                )
                for i in range(count)
            ]
            for future in futures:
                future.result(timeout=60)
            print("ACCEPTED", flush=True)
            time.sleep(600)
        else:
            s.wait_until_idle(timeout=120)
            print("IDLE", flush=True)


if __name__ == "__main__":
    main()
