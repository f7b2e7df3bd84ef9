"""Schedules: which program to run, what triggers it, and the constraints its runs wait for.

The JSON shape is the seeds' ScheduleDetail, so a user of their REST API recognises it::

    {"name": "runOnlyAtNight", "program": {"programName": "cleanup"},
     "trigger": {"type": "PARTITION", "dataset": "myDataset", "numPartitions": 1},
     "constraints": [{"type": "TIME_RANGE", "startTime": "22:00", "endTime": "06:00",
                      "timeZone": "Europe/Berlin", "waitUntilMet": true}],
     "timeoutMillis": 86400000}

Python code builds the same objects by field name (`Partition(dataset="d", num_partitions=4)`).
Times with no zone of their own (a TIME trigger, a TIME_RANGE constraint) are read in the
schedule's `timeZone`, UTC unless given.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from scheduler.schedules.cron import Cron, parse_cron, zone
from scheduler.schedules.errors import ScheduleError

DAY_MS = 86_400_000
TRIGGERING_PROPERTIES_MAPPING = "triggering.properties.mapping"
"""The schedule property whose JSON value maps the triggered run's argument names to properties
of the triggering run: ``{"cleanup_dir": "src"}``."""

_HH_MM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
# Fields of the seeds' ScheduleDetail that describe where a schedule lives in their system
# (namespaces, applications) or what their server reports; they mean nothing here.
_SEED_ONLY_FIELDS = ("namespace", "application", "applicationVersion", "status", "lastUpdateTime")


class RunStatus(enum.StrEnum):
    """The final statuses of a run, the ones a PROGRAM_STATUS trigger can name."""

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class CatchUp(enum.StrEnum):
    """What becomes of cron fires that no worker ran when they were due (see `catchup`)."""

    SKIP = "SKIP"
    """Only fires at most a minute late run: the seeds' behaviour."""
    ONCE = "ONCE"
    """The latest missed fire runs, once."""
    ALL = "ALL"
    """Every missed fire runs, oldest first, back to the schedule's timeout."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _check_zone(name: str | None) -> str | None:
    if name is not None:
        try:
            zone(name)
        except ScheduleError as error:
            raise ValueError(str(error)) from None
    return name


class Time(_Model):
    """Fires at every instant its cron expression names, read on the wall clock of its zone."""

    type: Literal["TIME"] = "TIME"
    cron: str = Field(alias="cronExpression")
    """Five fields, six with seconds first, or the seeds' Quartz dialect (see `cron`)."""
    time_zone: str | None = Field(default=None, alias="timeZone")
    """An IANA zone; None reads the cron in the schedule's zone."""

    _zone = field_validator("time_zone")(_check_zone)

    @field_validator("cron")
    @classmethod
    def _parses(cls, cron: str) -> str:
        try:
            parse_cron(cron, "UTC")
        except ScheduleError as error:
            raise ValueError(str(error)) from None
        return cron

    def parsed(self, default_zone: str) -> Cron:
        """The cron expression in this trigger's zone, or `default_zone` (the schedule's)."""
        return parse_cron(self.cron, self.time_zone or default_zone)


class Partition(_Model):
    """Satisfied once `num_partitions` partitions of `dataset` landed, counted over the events
    of one pending job."""

    type: Literal["PARTITION"] = "PARTITION"
    dataset: str = Field(min_length=1)
    num_partitions: int = Field(alias="numPartitions", ge=1)

    @field_validator("dataset", mode="before")
    @classmethod
    def _seed_dataset_id(cls, value: Any) -> Any:
        # The seeds write {"namespace": "default", "dataset": "name"}; there are no namespaces here.
        if isinstance(value, Mapping):
            namespace = value.get("namespace", "default")
            if namespace != "default":
                raise ValueError(
                    f"namespace {namespace!r} does not exist here (datasets have plain names); "
                    f'write the dataset\'s name as a string, e.g. "{value.get("dataset")}"'
                )
            return value.get("dataset")
        return value


class ProgramStatus(_Model):
    """Satisfied by a run of `program` that ended in one of `statuses`."""

    type: Literal["PROGRAM_STATUS"] = "PROGRAM_STATUS"
    program: str = Field(
        min_length=1,
        validation_alias=AliasChoices("programId", "program"),
        serialization_alias="programId",
    )
    statuses: frozenset[RunStatus] = Field(alias="programStatuses", min_length=1)

    @field_validator("program", mode="before")
    @classmethod
    def _seed_program_id(cls, value: Any) -> Any:
        # The seeds write {"namespace": ..., "application": ..., "program": "name", ...}.
        return value.get("program") if isinstance(value, Mapping) else value

    @field_serializer("program")
    def _program_id(self, program: str) -> dict[str, str]:
        return {"program": program}

    @field_serializer("statuses")
    def _sorted(self, statuses: frozenset[RunStatus]) -> list[str]:
        return sorted(status.value for status in statuses)


class And(_Model):
    """Satisfied once every trigger in it is, each over the same job's events."""

    type: Literal["AND"] = "AND"
    triggers: tuple[Trigger, ...] = Field(min_length=1)


class Or(_Model):
    """Satisfied once any trigger in it is."""

    type: Literal["OR"] = "OR"
    triggers: tuple[Trigger, ...] = Field(min_length=1)


Trigger = Annotated[Time | Partition | ProgramStatus | And | Or, Field(discriminator="type")]
Leaf = Time | Partition | ProgramStatus


def describe(trigger: Trigger, zone: str = "UTC") -> str:
    """The trigger on one line, for tables: `cron 5 * * * * Europe/Berlin`,
    `24 partitions of clicks`, `rollup COMPLETED|FAILED`, `(cron 0 4 * * * UTC) AND (...)`.
    A cron always names its zone: its own, else `zone` (the schedule's), so that `cron 0 2 * * *`
    is never read in the reader's own."""
    if isinstance(trigger, And | Or):
        return f" {trigger.type} ".join(f"({describe(inner, zone)})" for inner in trigger.triggers)
    if isinstance(trigger, Time):
        return f"cron {trigger.cron} {trigger.time_zone or zone}"
    if isinstance(trigger, Partition):
        many = "partition" if trigger.num_partitions == 1 else "partitions"
        return f"{trigger.num_partitions} {many} of {trigger.dataset}"
    return f"{trigger.program} {'|'.join(sorted(s.value for s in trigger.statuses))}"


def leaves(trigger: Trigger) -> Iterator[Leaf]:
    """The non-composite triggers inside `trigger`, depth first, in the order written."""
    if isinstance(trigger, And | Or):
        for inner in trigger.triggers:
            yield from leaves(inner)
    else:
        yield trigger


class Concurrency(_Model):
    """Met while fewer than `max_concurrency` runs of the program are active, whoever started
    them. Aborts the job unless told to wait."""

    type: Literal["CONCURRENCY"] = "CONCURRENCY"
    max_concurrency: int = Field(alias="maxConcurrency", ge=1)
    wait_until_met: bool = Field(default=False, alias="waitUntilMet")


class Delay(_Model):
    """Met `millis` after the job's first event. Always waits."""

    type: Literal["DELAY"] = "DELAY"
    millis: int = Field(alias="millisAfterTrigger", ge=1)
    wait_until_met: bool = Field(default=True, alias="waitUntilMet")

    @field_validator("wait_until_met")
    @classmethod
    def _always_waits(cls, wait: bool) -> bool:
        if not wait:
            raise ValueError("a delay always waits; drop waitUntilMet or set it to true")
        return wait


class TimeRange(_Model):
    """Met from `start` (inclusive) to `end` (exclusive), "HH:mm" on the wall clock of its zone;
    a window whose end is before its start crosses midnight. Waits unless told to abort."""

    type: Literal["TIME_RANGE"] = "TIME_RANGE"
    start: str = Field(alias="startTime")
    end: str = Field(alias="endTime")
    time_zone: str | None = Field(default=None, alias="timeZone")
    wait_until_met: bool = Field(default=True, alias="waitUntilMet")

    _zone = field_validator("time_zone")(_check_zone)

    @field_validator("start", "end")
    @classmethod
    def _hh_mm(cls, value: str) -> str:
        if not _HH_MM.match(value):
            raise ValueError(f"{value!r} is not a time of day; write HH:mm, e.g. '22:00'")
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> TimeRange:
        if self.start_minute == self.end_minute:
            raise ValueError(
                f"the window {self.start}-{self.end} is empty; give an end other than its start"
            )
        return self

    @property
    def start_minute(self) -> int:
        """Minutes after midnight at which the window opens."""
        hours, minutes = self.start.split(":")
        return int(hours) * 60 + int(minutes)

    @property
    def end_minute(self) -> int:
        """Minutes after midnight at which the window closes."""
        hours, minutes = self.end.split(":")
        return int(hours) * 60 + int(minutes)


class LastRun(_Model):
    """Met once `millis` passed since the end of the program's last completed run, and while no
    run of it is active. Aborts the job unless told to wait."""

    type: Literal["LAST_RUN"] = "LAST_RUN"
    millis: int = Field(alias="millisSinceLastRun", ge=1)
    wait_until_met: bool = Field(default=False, alias="waitUntilMet")


Constraint = Annotated[Concurrency | Delay | TimeRange | LastRun, Field(discriminator="type")]


def _parse_mapping(text: str) -> dict[str, str]:
    """target argument -> source property, from the mapping property's JSON value. The seeds'
    pipelines write {"arguments": [{"source": s, "target": t}, ...]}, which is read too."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict) and isinstance(value.get("arguments"), list):
        pairs = value["arguments"]
        if all(isinstance(p, dict) and {"source", "target"} <= p.keys() for p in pairs):
            value = {str(p["target"]): p["source"] for p in pairs}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(
            f"{TRIGGERING_PROPERTIES_MAPPING!r} must be a JSON object from argument name to "
            f'the triggering run\'s property, e.g. {{"cleanup_dir": "src"}}; got {text!r}'
        )
    return value


class Schedule(_Model):
    """A named rule that starts runs of `program` when `trigger` is satisfied and every one of
    `constraints` is met, within `timeout_millis` of the job's first event."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
    description: str = ""
    program: str = Field(min_length=1)
    properties: dict[str, str] = Field(default_factory=dict)
    """Given to every run as arguments (the mapping property excepted)."""
    trigger: Trigger
    constraints: tuple[Constraint, ...] = ()
    timeout_millis: int = Field(default=DAY_MS, alias="timeoutMillis", ge=1)
    time_zone: str = Field(default="UTC", alias="timeZone")
    catch_up: CatchUp = Field(default=CatchUp.ALL, alias="catchUp")
    """What becomes of cron fires missed while no worker ran."""

    _zone = field_validator("time_zone")(_check_zone)

    @model_validator(mode="before")
    @classmethod
    def _drop_seed_only_fields(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if k not in _SEED_ONLY_FIELDS}
        return data

    @field_validator("program", mode="before")
    @classmethod
    def _seed_program(cls, value: Any) -> Any:
        # The seeds write {"programName": "name", "programType": "WORKFLOW"}.
        return value.get("programName") if isinstance(value, Mapping) else value

    @field_serializer("program")
    def _program_info(self, program: str) -> dict[str, str]:
        return {"programName": program}

    @field_validator("properties")
    @classmethod
    def _mapping_is_readable(cls, properties: dict[str, str]) -> dict[str, str]:
        if TRIGGERING_PROPERTIES_MAPPING in properties:
            _parse_mapping(properties[TRIGGERING_PROPERTIES_MAPPING])
        return properties

    def properties_mapping(self) -> dict[str, str]:
        """Argument name of the triggered run -> property of the triggering run."""
        text = self.properties.get(TRIGGERING_PROPERTIES_MAPPING)
        return {} if text is None else _parse_mapping(text)

    def crons(self) -> list[Cron]:
        """The cron expressions of the TIME triggers in this schedule, each in its zone."""
        return [
            leaf.parsed(self.time_zone) for leaf in leaves(self.trigger) if isinstance(leaf, Time)
        ]

    def next_fire_after(self, after_ms: int) -> int | None:
        """The first fire of any TIME trigger strictly after `after_ms`; None without one."""
        fires = [cron.next_after(after_ms) for cron in self.crons()]
        return min(fires) if fires else None

    def previous_fire_before(self, before_ms: int) -> int | None:
        """The last fire of any TIME trigger strictly before `before_ms`; None without one."""
        fires = [cron.previous_before(before_ms) for cron in self.crons()]
        return max(fires) if fires else None

    def to_json(self) -> dict[str, Any]:
        """The schedule in the seeds' ScheduleDetail shape (plus its time zone)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


And.model_rebuild()
Or.model_rebuild()
Schedule.model_rebuild()
