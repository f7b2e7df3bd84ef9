"""The API's request and response bodies (its OpenAPI document is made from them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from scheduler.model import TaskState

StateName = Literal["pending", "running", "retrying", "succeeded", "failed", "cancelled"]
assert set(StateName.__args__) == {state.value for state in TaskState}  # type: ignore[attr-defined]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskIn(_Strict):
    """A task to schedule, as `schedule_task` takes it."""

    ordering_id: str = Field(description="Tasks of one ordering id run one at a time, in order.")
    scheduled_time: AwareDatetime = Field(
        description="When it is due: ISO 8601 with a time zone (2027-01-31T14:00:00Z)."
    )
    uniqueness_key: str = Field(
        description="Tells tasks of the same ordering id and time apart; the same key again "
        "overwrites a pending task."
    )
    data: dict[str, Any] = Field(default_factory=dict, description="The executor's arguments.")


class TasksIn(_Strict):
    """Several tasks: every one is checked before any is written."""

    tasks: list[TaskIn] = Field(min_length=1, max_length=10_000)


class TaskKeyIn(_Strict):
    """The three values that name a task."""

    ordering_id: str
    scheduled_time: AwareDatetime
    uniqueness_key: str


class Scheduled(BaseModel):
    """What was scheduled."""

    count: int = Field(description="How many tasks the log acknowledged.")
    keys: list[TaskKeyOut]


class TaskKeyOut(BaseModel):
    ordering_id: str
    scheduled_time: str = Field(description="ISO 8601 UTC with milliseconds.")
    uniqueness_key: str
    partition: int


class TaskOut(BaseModel):
    """A task as the store holds it."""

    key: str = Field(description="ORDERING_ID/TIME/UNIQUENESS_KEY, as logs and the CLI print it.")
    partition: int
    ordering_id: str
    scheduled_time: str
    scheduled_ms: int
    uniqueness_key: str
    state: StateName
    attempts: int
    last_error: str | None
    next_attempt_time: str | None
    updated_time: str | None
    data: dict[str, Any]


class TaskDetail(TaskOut):
    attempt_history: list[dict[str, Any]]


class TaskPage(BaseModel):
    """A page of tasks in (partition, schedule) order."""

    tasks: list[TaskOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class TaskFilterIn(_Strict):
    """Which tasks a bulk change touches: those that match every field given."""

    ordering_id: str | None = None
    partition: int | None = Field(default=None, ge=0)
    states: list[StateName] | None = None
    scheduled_from: AwareDatetime | None = None
    scheduled_before: AwareDatetime | None = None


class ChangeIn(_Strict):
    """The tasks to change: `keys`, or a `filter` (retry, drop and rerun only)."""

    keys: list[TaskKeyIn] | None = Field(default=None, min_length=1, max_length=10_000)
    filter: TaskFilterIn | None = None
    dry_run: bool = Field(default=False, description="Say what would change; send nothing.")


class RerunIn(ChangeIn):
    data: dict[str, Any] | None = Field(
        default=None, description="Run with this data instead of the data the status kept."
    )


class ChangeOut(BaseModel):
    """What a change touched (or would, in a dry run)."""

    operation: str
    count: int
    dry_run: bool
    sample: list[TaskKeyOut] = Field(description="The first tasks touched, at most 10.")


class PartitionOut(BaseModel):
    """One partition of the group's topic."""

    partition: int
    owner: str | None
    committed: int | None
    end: int
    lag: int
    in_flight: int
    overdue: int


class WorkerOut(BaseModel):
    """A group member that owns partitions."""

    name: str
    partitions: list[int]


class FleetOut(BaseModel):
    """The worker group at a glance."""

    group: str
    topic: str
    workers: list[WorkerOut]
    partitions: list[PartitionOut]
    lag: int
    in_flight: int
    overdue: int


class HealthOut(BaseModel):
    """Whether the API reaches its backends."""

    status: Literal["ok", "degraded"]
    store: str = Field(description="`ok`, or what keeps the store from working.")
    log: str = Field(description="`ok`, or what keeps the log from working.")


class WhoAmI(BaseModel):
    name: str
    role: str


class TokenIn(BaseModel):
    """A token to make."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]*$",
        description="Who or what holds it; unique. Letters, digits and . _ @ -.",
    )
    role: Literal["read", "operate", "admin"]


class TokenOut(BaseModel):
    """A token as the API shows it: never the token itself, nor its hash."""

    name: str
    role: str
    created: str = Field(description="When it was made, ISO 8601 UTC.")


class TokenCreated(TokenOut):
    """A token just made."""

    token: str = Field(description="The bearer token: shown this once, keep it secret.")


Scheduled.model_rebuild()


class ProgramOut(BaseModel):
    """A program the deployment declares (its programs file)."""

    name: str
    kind: str = Field(description="`spark`, `spark-submit` or `command`.")
    spec: dict[str, Any] = Field(description="What it runs, as the programs file declares it.")
    properties: dict[str, Any] = Field(description="Default arguments of its runs.")
    description: str


class RunOut(BaseModel):
    """One run of a program."""

    run_id: str
    program: str
    started_by: str = Field(description="`operator:<name>`, `schedule:<id>`, ...")
    arguments: dict[str, Any]
    status: Literal["PENDING", "RUNNING", "COMPLETED", "FAILED", "KILLED"]
    created_time: str
    requested_time: str | None
    started_time: str | None
    ended_time: str | None
    attempts: int
    last_error: str | None
    request_key: str
    output: str | None = Field(
        None,
        description="The file the program's output went to on the worker that ran it (a "
        "command's standard output, a spark-submit's log); null if its executor wrote none.",
    )
    worker: str | None = Field(
        None,
        description="The worker process (its client id, which starts with its host name) "
        "running or that ran the latest attempt: the machine `output` is on.",
    )


class RunPage(BaseModel):
    """A page of runs, newest first."""

    runs: list[RunOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next (older) page; null on the last page."
    )


class RunStartIn(_Strict):
    """A run to start by hand."""

    arguments: dict[str, str] = Field(
        default_factory=dict,
        description="The run's arguments (over the program's default properties); values fill "
        "the program's declared templates, they are never run as commands.",
    )
    request_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Names this request: the same id starts one run however often it is sent.",
    )


class RunStarted(BaseModel):
    run_id: str
    request_key: str


class RunKilled(BaseModel):
    run_id: str
    killed_before_start: bool = Field(
        description="True: it was still PENDING and is KILLED now; false: its process is being "
        "stopped and it ends KILLED shortly."
    )


class ScheduleOut(BaseModel):
    """A schedule with its state: the seeds' ScheduleDetail (`schedule`) and what the engine
    keeps of it."""

    name: str
    status: Literal["ENABLED", "DISABLED"]
    trigger_type: str = Field(description="TIME, PARTITION, PROGRAM_STATUS, AND or OR.")
    program: str
    revision: int = Field(description="A new one at each create and update.")
    created_time: str | None
    updated_time: str | None
    disabled_time: str | None
    next_fire_times: list[str] = Field(description="The next fire of each cron, while enabled.")
    source: str = Field(description="Who declared it: a file, or `api:<token name>`.")
    schedule: dict[str, Any]


class RunTimesOut(BaseModel):
    name: str
    times: list[str] = Field(description="ISO 8601, UTC.")


class ScheduleJobOut(BaseModel):
    """One job of a schedule: events collected towards its trigger, then its constraints."""

    job_key: str
    state: str = Field(description="PENDING_TRIGGER, PENDING_CONSTRAINT, PENDING_LAUNCH, ...")
    revision: int
    first_event_time: str | None
    events: int = Field(description="How many events it holds.")
    waiting_for: list[str] = Field(
        description="While open: the trigger parts not satisfied yet, or the constraints."
    )
    reason: str = Field(description="Why it ended (ABORTED, TIMED_OUT, OBSOLETE), else empty.")
    run_id: str | None = Field(
        default=None, description="The run a launched job (PENDING_LAUNCH) asked for."
    )
    run_status: str | None = Field(
        default=None,
        description="That run's status (PENDING to COMPLETED, FAILED, KILLED); none before the "
        "launch made the run.",
    )


class ReenableIn(_Strict):
    """The range of disable times whose schedules are enabled again."""

    start_time: AwareDatetime = Field(description="From (inclusive), ISO 8601 with a zone.")
    end_time: AwareDatetime = Field(description="To (exclusive), ISO 8601 with a zone.")


class ReenabledOut(BaseModel):
    enabled: list[str] = Field(description="The schedules enabled again, by name.")


class BatchConfigIn(_Strict):
    """A batch configuration: the text of a jobs file (docs/batch-jobs.md)."""

    text: str = Field(max_length=10_000_000, description="The file's JSON.")


class BatchCheckOut(BaseModel):
    jobs: list[str] = Field(description="The configuration's jobs, by name.")


class BatchAccepted(BaseModel):
    """A change sent to the configuration's queue; a worker applies it shortly."""

    jobs: list[str]


class BatchJobOut(BaseModel):
    """One batch job and its partitions counted by state."""

    name: str
    paused: bool = Field(description="Paused by an operator.")
    max_parallelism: int
    total: int
    succeeded: int
    marked_success: int
    running: int
    failed: int
    removed: int
    waiting_time: int
    pending: int = Field(description="Due and not finished, running or failed.")
    oldest_pending: str | None


class BatchConfigurationOut(BaseModel):
    name: str
    text: str
    loaded_time: str
    source: str
    paused: list[str]
    jobs: list[BatchJobOut]


class BatchPartitionOut(BaseModel):
    """One partition of a job as an operator reads it."""

    job: str
    partition: str = Field(description="`2000-01-01 00:00:00`, UTC.")
    partition_time: str
    status: str = Field(description="WAITING_TIME, WAITING_DEPENDENCIES, RUNNABLE, RUNNING, ...")
    waiting_for: list[str] = Field(description="The dependency partitions not done yet.")
    reason: str = Field(description="Why it is blocked, skipped, removed or failed.")
    retry_time: str | None
    attempts: int


class BatchRerunIn(_Strict):
    """A range of partitions to run again."""

    from_time: AwareDatetime = Field(description="The first partition (inclusive).")
    to_time: AwareDatetime = Field(description="The end of the range (exclusive).")
    with_dependants: bool = Field(default=False, description="Re-run their dependants too.")
