"""How a partition becomes a run, and how a run's end comes back: the batch layer's use of the
programs and runs (docs/programs-and-runs.md).

A partition's attempt is a launch request keyed ``job:<name>/<partition>#<attempt>`` in the
program's queue, so a decision executed twice launches one run per (job, partition, attempt) and
never two runs of a partition at once. A `command` job runs as the built-in program
`batch-command`, whose argv, stdout and stderr come from the run's own arguments: the command
captured when the attempt started is the one that runs, whatever a reload changes later. A
`spark_job` runs as `batch-spark`; a `program` job as that program, with the job's arguments.
The run's system arguments name the configuration, job, partition and attempt; the subscriber
handler (`ended_tasks`) turns the run's program-status event into an `ended` task in the batch
queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.batch.durations import format_partition
from scheduler.batch.partitions import Launch
from scheduler.model import Task, from_epoch_ms
from scheduler.programs.catalog import ProgramCatalog
from scheduler.programs.events import ProgramStatusEvent
from scheduler.programs.launch import LaunchRequest
from scheduler.programs.model import Program, ProgramKind, StartedBy, StarterKind
from scheduler.programs.subscriber import ReceivedEvent

BATCH_EXECUTOR = "batch"
"""The executor route of the batch queue's tasks."""
QUEUE = "batch:"
"""The ordering id of a configuration's tasks is this plus its name."""
COMMAND_PROGRAM = "batch-command"
SPARK_PROGRAM = "batch-spark"

_LEFT = "{{"
_ESCAPE = "{{_lb}}"
"""The command executor renders `{{name}}` templates; a batch command is data from the file,
never a template, so each literal `{{` goes through as the variable `_lb` whose value is `{{`."""


def _literal(text: str) -> str:
    return text.replace(_LEFT, _ESCAPE)


class BatchCommandProgram(Program):
    """`batch-command`: the argv, stdout and stderr of the run's own arguments."""

    def task_data(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        data: dict[str, Any] = {
            "executor": "command",
            "argv": [_literal(str(a)) for a in arguments["_argv"]],
            "vars": {"_lb": _LEFT},
        }
        for name in ("stdout", "stderr"):
            if arguments.get(f"_{name}"):
                data[name] = _literal(str(arguments[f"_{name}"]))
        return data


class BatchSparkProgram(Program):
    """`batch-spark`: the registered PySpark job the run's arguments name."""

    def task_data(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        args = {k: v for k, v in arguments.items() if not k.startswith("_")}
        return {"executor": "spark", "job": arguments["_spark_job"], "args": args}


def register_programs(catalog: ProgramCatalog) -> None:
    """Declare the built-in programs batch runs are made of in `catalog`."""
    catalog.register(
        BatchCommandProgram(
            COMMAND_PROGRAM, ProgramKind.COMMAND, {}, description="a batch job's command"
        )
    )
    catalog.register(
        BatchSparkProgram(
            SPARK_PROGRAM, ProgramKind.SPARK, {}, description="a batch job's PySpark job"
        )
    )


def program_of(launch: Launch) -> str:
    if launch.argv is not None:
        return COMMAND_PROGRAM
    if launch.spark_job is not None:
        return SPARK_PROGRAM
    assert launch.program is not None
    return launch.program


def request_key(job: str, partition_ms: int, attempt: int) -> str:
    """``job:<name>/<yyyy-MM-dd HH:mm:ss>#<attempt>``: one run per attempt of a partition."""
    return f"job:{job}/{format_partition(partition_ms)}#{attempt}"


def launch_request(launch: Launch, attempt: int, name: str, now_ms: int) -> LaunchRequest:
    """The launch request of attempt `attempt` of `launch` under configuration `name`."""
    system: dict[str, Any] = {
        "batch": name,
        "job": launch.job,
        "partition": launch.partition,
        "attempt": attempt,
        "logical_time": format_partition(launch.partition),
    }
    if launch.argv is not None:
        system.update(argv=list(launch.argv), stdout=launch.stdout_path, stderr=launch.stderr_path)
    if launch.spark_job is not None:
        system["spark_job"] = launch.spark_job
    return LaunchRequest(
        program=program_of(launch),
        request_key=request_key(launch.job, launch.partition, attempt),
        started_by=StartedBy(StarterKind.BATCH_JOB, launch.job),
        requested_at=from_epoch_ms(now_ms),
        properties=dict(launch.arguments),
        system=system,
    )


def ended_tasks(received: ReceivedEvent) -> Iterable[Task]:
    """The subscriber handler: a batch run's program-status event becomes an `ended` task in its
    configuration's queue, keyed by the event's position (read twice, it runs once)."""
    event = received.event
    if not isinstance(event, ProgramStatusEvent):
        return []
    props = event.properties
    if "_batch" not in props or "_job" not in props:
        return []
    return [
        received.task(
            QUEUE + str(props["_batch"]),
            {
                "executor": BATCH_EXECUTOR,
                "op": "ended",
                "job": str(props["_job"]),
                "partition": int(props["_partition"]),
                "attempt": int(props["_attempt"]),
                "run_id": event.run_id,
                "status": str(event.status),
            },
        )
    ]


def control_task(name: str, op: str, at_ms: int, key: str, **data: Any) -> Task:
    """A task of the batch queue of configuration `name`."""
    return Task(
        QUEUE + name, from_epoch_ms(at_ms), key, {"executor": BATCH_EXECUTOR, "op": op, **data}
    )
