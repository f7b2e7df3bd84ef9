"""What an operator does to runs, the CLI's `scheduler runs` and the REST API alike: find a run,
start a program by hand, kill a run.

A start is a launch request in the program's queue (a worker decides it, under the program's
concurrency). A kill of a run with a `run` task of its own cancels that task (which stops its
process or Spark job group). A run of a launch batch shares its `run-many` task with the other
runs of the batch, so its kill is written to its record instead (KILLED, conditional on RUNNING):
the batch task reads its running runs' records and cancels that run alone. Either way a run
still PENDING is ended KILLED here, with a conditional write its task cannot race.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.errors import AmbiguousRunIdError, RunNotFoundError, TaskStateError
from scheduler.programs.abc import run_cursor
from scheduler.programs.launch import LaunchRequest, operator_request, run_task
from scheduler.programs.model import Run, RunStatus

if TYPE_CHECKING:
    from scheduler.client import SchedulerClient
    from scheduler.programs.abc import RunStore
    from scheduler.programs.catalog import ProgramCatalog
    from scheduler.settings import Settings

ACK_TIMEOUT_S = 60.0


def get_run(run_store: RunStore, run_id: str) -> Run:
    """The run of `run_id`, or `RunNotFoundError` saying where to look."""
    run = run_store.get(run_id)
    if run is None:
        raise RunNotFoundError(
            f"no run {run_id!r} in the run store: a run just requested is written when a "
            "worker with programs_file launches it, and a run older than run_retention_s is "
            "gone; `scheduler runs list` shows the runs there are"
        )
    return run


RUN_ID_LENGTH = 36
"""A run id's length (a UUID's text): a shorter one may be the start of one."""
PREFIX_SCAN = 10_000
"""How many of the newest runs a shortened run id is looked for among."""


def whole_run_id(run_store: RunStore, text: str) -> str:
    """`text`, or the one run id among the newest `PREFIX_SCAN` runs that starts with it (4
    characters or more: the dashboard shows 8, as `git` shortens commit ids); what matches no
    run is returned as given, for `get_run` to say so. `AmbiguousRunIdError` when several do."""
    if len(text) >= RUN_ID_LENGTH or len(text) < 4 or run_store.get(text) is not None:
        return text
    matches: list[str] = []
    after = None
    seen = 0
    while seen < PREFIX_SCAN:
        wanted = min(1000, PREFIX_SCAN - seen)
        page = run_store.list_runs(limit=wanted, after=after)
        matches += [run.run_id for run in page if run.run_id.startswith(text)]
        seen += len(page)
        if len(page) < wanted:
            break
        after = run_cursor(page[-1])
    if len(matches) > 1:
        raise AmbiguousRunIdError(
            f"{text!r} starts {len(matches)} run ids ({', '.join(matches[:5])}); give more of it"
        )
    return matches[0] if matches else text


def start(
    client: SchedulerClient,
    catalog: ProgramCatalog,
    program: str,
    *,
    request_id: str,
    operator: str,
    now_ms: int,
    properties: Mapping[str, Any] | None = None,
) -> LaunchRequest:
    """Request one run of `program` (refused with the known ones if it is not declared); the
    same `request_id` starts one run however often it is sent. Returns once the log has it."""
    catalog.get(program)
    request = operator_request(
        program, request_id, operator=operator, now_ms=now_ms, properties=properties
    )
    client.schedule_task(request.task()).result(ACK_TIMEOUT_S)
    return request


def kill(
    client: SchedulerClient, run_store: RunStore, settings: Settings, run_id: str, *, now_ms: int
) -> bool:
    """Kill the run: a run still PENDING ends KILLED at once (and its status event is
    published); a running one is stopped by its task, which then ends it KILLED and publishes
    it. True when it was killed before it started; `TaskStateError` when it had ended already."""
    from scheduler.programs.events import EventPublisher, ProgramStatusEvent
    from scheduler.programs.runtime import build_events_log

    run = get_run(run_store, run_id)
    if run.status.is_terminal:
        raise TaskStateError(f"run {run_id} already ended {run.status}; nothing to kill")
    if run.batch is None:
        client.cancel_task(run_task(run.run_id, run.created_ms).key).result(ACK_TIMEOUT_S)
    killed = run.with_status(RunStatus.KILLED, ended_ms=now_ms, last_error="killed by an operator")
    if run.status is RunStatus.PENDING and run_store.transition(killed, {RunStatus.PENDING}):
        events_log = build_events_log(settings)
        publisher = EventPublisher(events_log)
        try:
            publisher.publish(ProgramStatusEvent.of(killed)).result(ACK_TIMEOUT_S)
        finally:
            publisher.close()
            events_log.close()
        return True
    if run.batch is not None:
        kill_batch_run(run_store, run_id, now_ms=now_ms)
    return False


def kill_batch_run(run_store: RunStore, run_id: str, *, now_ms: int) -> bool:
    """Write RUNNING run `run_id` of a launch batch KILLED, for its `run-many` task to stop it
    (and publish its status); False if it is not RUNNING (it ended meanwhile)."""
    run = run_store.get(run_id)
    if run is None or run.status is not RunStatus.RUNNING:
        return False
    killed = run.with_status(RunStatus.KILLED, ended_ms=now_ms, last_error="killed by an operator")
    return run_store.transition(killed, {RunStatus.RUNNING})
