"""Partitioned batch jobs (issue 43): the engine-independent core.

The seed's JSON configuration and its check (`config`), durations and the one calendar
arithmetic (`durations`), partitions as instants computed on demand with dependency matching and
templating (`partitions`), a job's partitions as a compact pure state (`state`), the decision of
what starts now and where each partition stands (`decide`), reloads as diffs (`reload`) and
the state as JSON for the store (`codec`).
Nothing here reads a clock or imports the engine: every function takes `now` (epoch ms, UTC).
See docs/batch-jobs.md.
"""

from scheduler.batch.codec import decode_state, encode_state
from scheduler.batch.config import (
    Configuration,
    Dependency,
    FailurePolicy,
    Job,
    OnFailure,
    parse_configuration,
)
from scheduler.batch.decide import Summary, View, runnable, summary, view, views
from scheduler.batch.durations import (
    Duration,
    format_partition,
    parse_duration,
    parse_partition,
)
from scheduler.batch.errors import BatchConfigError, PartitionStateError, Problem
from scheduler.batch.partitions import Grid, Launch, launch, partition_key, render
from scheduler.batch.reload import Diff, apply, diff, prune
from scheduler.batch.state import (
    Failed,
    JobState,
    Outcome,
    Running,
    Status,
    apply_retention,
    finish,
    new_state,
    rerun,
    retention_cutoff,
    start,
)

__all__ = [
    "BatchConfigError",
    "Configuration",
    "Dependency",
    "Diff",
    "Duration",
    "Failed",
    "FailurePolicy",
    "Grid",
    "Job",
    "JobState",
    "Launch",
    "OnFailure",
    "Outcome",
    "PartitionStateError",
    "Problem",
    "Running",
    "Status",
    "Summary",
    "View",
    "apply",
    "apply_retention",
    "decode_state",
    "diff",
    "encode_state",
    "finish",
    "format_partition",
    "launch",
    "new_state",
    "parse_configuration",
    "parse_duration",
    "parse_partition",
    "partition_key",
    "prune",
    "render",
    "rerun",
    "retention_cutoff",
    "runnable",
    "start",
    "summary",
    "view",
    "views",
]
