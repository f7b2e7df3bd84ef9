"""`/api/v1/batch`: the batch jobs of the deployment's configuration (`batch_name`), on
`scheduler.batch.api.BatchJobs` as `scheduler jobs` uses it.

Reads come from the batch store, so an API served beside a fleet shows what its workers do;
given the deployment's `batch_file`, they show that file's jobs until a worker applied it (the
configuration's `source` then ends with "(not applied yet)"). A load, a re-run, a pause or a
resume is a task of the configuration's queue that a worker applies in order with everything
else the jobs do, so they answer 202 once sent.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from scheduler.admin import iso
from scheduler.api.auth import Role, TokenEntry
from scheduler.api.deps import api_state, require
from scheduler.api.errors import ERROR_RESPONSES, ErrorBody
from scheduler.api.schemas import (
    BatchAccepted,
    BatchCheckOut,
    BatchConfigIn,
    BatchConfigurationOut,
    BatchJobOut,
    BatchPartitionOut,
    BatchRerunIn,
)
from scheduler.api.state import ApiState
from scheduler.batch.api import BatchJobs, JobRow, check
from scheduler.batch.decide import View
from scheduler.batch.durations import format_partition
from scheduler.batch.state import Status

_404: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No configuration is loaded, or no such job."}
}

router = APIRouter(prefix="/api/v1/batch", tags=["batch jobs"], responses=ERROR_RESPONSES)
State = Annotated[ApiState, Depends(api_state)]
Reader = Annotated[TokenEntry, Depends(require(Role.READ))]
Operator = Annotated[TokenEntry, Depends(require(Role.OPERATE))]
Admin = Annotated[TokenEntry, Depends(require(Role.ADMIN))]


def _job(row: JobRow) -> BatchJobOut:
    counts = row.counts
    return BatchJobOut(
        name=row.name,
        paused=row.paused,
        max_parallelism=row.max_parallelism,
        total=counts.total,
        succeeded=counts.succeeded,
        marked_success=counts.marked_success,
        running=counts.running,
        failed=counts.failed,
        removed=counts.removed,
        waiting_time=counts.waiting_time,
        pending=counts.pending,
        oldest_pending=None if counts.oldest_pending is None else iso(counts.oldest_pending),
    )


def _partition(view: View) -> BatchPartitionOut:
    return BatchPartitionOut(
        job=view.job,
        partition=format_partition(view.partition),
        partition_time=iso(view.partition),
        status=str(view.status),
        waiting_for=list(view.waiting_for),
        reason=view.reason or "",
        retry_time=None if view.retry_at is None else iso(view.retry_at),
        attempts=view.attempts,
    )


def _jobs(state: ApiState) -> BatchJobs:
    """The deployment's batch jobs, its `batch_file` shown until a worker applied it."""
    jobs = state.batch_jobs()
    jobs.file = state.settings.batch_file
    return jobs


def _ms(value: Any) -> int:
    return int(value.timestamp() * 1000)


@router.get("/configuration", summary="The configuration in force", responses=_404)
def configuration(state: State, _: Reader) -> BatchConfigurationOut:
    """Its text as loaded, when and from where, the paused jobs and each job's counts."""
    jobs = _jobs(state)
    rows = jobs.jobs()  # 404 before the first load
    stored = jobs.stored()
    assert stored is not None
    return BatchConfigurationOut(
        name=jobs.name,
        text=stored.text,
        loaded_time=iso(stored.loaded_ms),
        source=stored.source,
        paused=sorted(stored.paused),
        jobs=[_job(row) for row in rows],
    )


@router.post("/configuration/check", summary="Check a configuration")
def check_configuration(body: BatchConfigIn, _: Admin) -> BatchCheckOut:
    """Check a configuration without loading it: 400 listing every problem, else its jobs."""
    config = check(body.text)
    return BatchCheckOut(jobs=[job.name for job in config.jobs])


@router.put("/configuration", status_code=202, summary="Load a configuration")
def load_configuration(body: BatchConfigIn, state: State, caller: Admin) -> BatchAccepted:
    """Check it (400 listing every problem) and have the engine apply it as a diff of the one in
    force: new jobs start, changed ones keep the partitions that still fit."""
    config = _jobs(state).load(body.text, source=f"api:{caller.name}")
    return BatchAccepted(jobs=[job.name for job in config.jobs])


@router.get("/jobs", summary="List batch jobs")
def list_jobs(state: State, _: Reader) -> list[BatchJobOut]:
    """Every job of the configuration in force, its partitions counted by state; none before
    the first load (`GET /batch/configuration` is the 404 then)."""
    jobs = _jobs(state)
    return [] if jobs.stored() is None else [_job(row) for row in jobs.jobs()]


@router.get("/jobs/{job}/partitions", summary="A job's partitions", responses=_404)
def partitions(
    job: str,
    state: State,
    _: Reader,
    status: Annotated[
        list[Status] | None, Query(description="Only partitions in these statuses; repeat.")
    ] = None,
    first: Annotated[int, Query(ge=0, description="From this partition index (0: the first).")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many looked at.")] = 100,
) -> list[BatchPartitionOut]:
    """The partitions from index `first`, each with its status, what it waits for (the
    dependency partitions not done yet) or why it never will run."""
    views = _jobs(state).partitions(
        job, statuses=set(status) if status else None, first=first, limit=limit
    )
    return [_partition(view) for view in views]


@router.post(
    "/jobs/{job}/rerun", status_code=202, summary="Re-run a range of partitions", responses=_404
)
def rerun(job: str, body: BatchRerunIn, state: State, _: Operator) -> BatchAccepted:
    """Run the partitions in [from_time, to_time) again, those that succeeded included (and
    their dependants' with `with_dependants`)."""
    _jobs(state).rerun(
        job, _ms(body.from_time), _ms(body.to_time), with_dependants=body.with_dependants
    )
    return BatchAccepted(jobs=[job])


@router.post("/jobs/{job}/pause", status_code=202, summary="Pause a job", responses=_404)
def pause(job: str, state: State, _: Operator) -> BatchAccepted:
    """Start no new partition of the job (running ones go on) until it is resumed."""
    _jobs(state).pause(job)
    return BatchAccepted(jobs=[job])


@router.post("/jobs/{job}/resume", status_code=202, summary="Resume a job", responses=_404)
def resume(job: str, state: State, _: Operator) -> BatchAccepted:
    """Start its partitions again."""
    _jobs(state).resume(job)
    return BatchAccepted(jobs=[job])
