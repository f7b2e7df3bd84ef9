"""`scheduler worker` that dies (exit 9, no clean-up) once in the middle of a cron fire:
`python -m tests.schedules.crash_child MODE MARKER`.

MODE `enqueued`: the fire enqueued its launch request, and dies before writing the job.
MODE `written`: the fire wrote the job, and dies before writing the schedule's record.
MODE `tick`: a tick (a lone cron's fire) sent its launches and wrote the jobs, and dies before
advancing the records.
The MARKER file is made as it dies, so a worker started later with it present runs normally.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from scheduler.schedules.executor import ScheduleExecutor


def main() -> None:
    mode, marker = sys.argv[1], sys.argv[2]

    def die_once() -> None:
        if not os.path.exists(marker):
            with open(marker, "w") as made:
                made.write(mode)
            os._exit(9)

    if mode == "enqueued":
        enqueue = ScheduleExecutor._enqueue

        def crashing_enqueue(self: Any, task: Any) -> None:
            enqueue(self, task)
            if task.ordering_id.startswith("program:"):
                die_once()

        ScheduleExecutor._enqueue = crashing_enqueue  # type: ignore[method-assign]
    elif mode == "tick":
        from scheduler.stores.schedules_cassandra import CassandraScheduleStore

        put_jobs = CassandraScheduleStore.put_jobs

        def crashing_put_jobs(self: Any, jobs: Any, **kw: Any) -> None:
            put_jobs(self, jobs, **kw)
            die_once()

        CassandraScheduleStore.put_jobs = crashing_put_jobs  # type: ignore[method-assign]
    else:
        write = ScheduleExecutor._write_job

        def crashing_write(self: Any, job: Any) -> None:
            write(self, job)
            if job.state.value == "PENDING_LAUNCH":
                die_once()

        ScheduleExecutor._write_job = crashing_write  # type: ignore[method-assign]
    from scheduler.cli.main import cli

    cli.main(["worker"], prog_name="scheduler")


if __name__ == "__main__":
    main()
