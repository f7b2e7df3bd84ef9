"""A harness for fleets of real worker processes: record every attempt, then check the history.

Used by the multi-process tests (`tests/distributed/`) and the benchmark command. The pieces:

* `recording_executor`, which workers load through `SCHEDULER_EXECUTOR=scheduler.fleet:
  recording_executor`, appends a JSON line when an attempt starts and one when it ends to the file
  named by `SCHEDULER_FLEET_RECORD`. Every worker appends to the same file with `O_APPEND`, so
  lines from several processes never interleave.
* `WorkerProcess` runs `scheduler worker` as a child process with a given environment.
* `LoadGenerator` enqueues a steady load, each ordering id's tasks in key order.
* `read_history` and `check_history` turn the record into a verdict: what is missing,
  duplicated, out of order or overlapping.

Times are wall-clock epoch milliseconds, comparable across the processes of one machine.
"""

from scheduler.fleet.history import (
    RECORD_ENV,
    Execution,
    HistoryReport,
    KeyTuple,
    as_key_tuple,
    check_history,
    read_history,
    recording_executor,
)
from scheduler.fleet.load import LoadGenerator, TaskData
from scheduler.fleet.processes import GroupView, WorkerProcess, scheduler_script
from scheduler.fleet.rebalance import RebalanceReport, measure_rebalance

__all__ = [
    "RECORD_ENV",
    "Execution",
    "GroupView",
    "HistoryReport",
    "KeyTuple",
    "LoadGenerator",
    "RebalanceReport",
    "TaskData",
    "WorkerProcess",
    "as_key_tuple",
    "check_history",
    "measure_rebalance",
    "read_history",
    "recording_executor",
    "scheduler_script",
]
