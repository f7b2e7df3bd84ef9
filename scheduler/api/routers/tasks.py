"""`/api/v1/tasks`: schedule tasks, look at them, and change them as `scheduler tasks` does.

Scheduling goes through the deployment's `SchedulerClient` (`schedule_task`, `schedule_tasks`),
so a task is checked exactly as a producer's is. Changes by key are checked against the store
first (`scheduler.admin.check_changes`), changes by filter are `scheduler.bulk`'s; both travel on
the log to the partition's owner, like the CLI's. Listings are read from the store a page at a
time and continue with the opaque `next_cursor`.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import AwareDatetime
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.responses import Response

from scheduler.admin import (
    check_changes,
    find_task,
    iso,
    list_page,
    partition_of,
    request_changes,
    status_dict,
)
from scheduler.api.auth import CHANGE_ROLES, Role, TokenEntry
from scheduler.api.bodies import parse_tasks
from scheduler.api.deps import api_state, require
from scheduler.api.errors import ERROR_RESPONSES, ErrorBody
from scheduler.api.listing_json import json_response
from scheduler.api.schemas import (
    ChangeIn,
    ChangeOut,
    RerunIn,
    Scheduled,
    StateName,
    TaskDetail,
    TaskIn,
    TaskKeyOut,
    TaskPage,
)
from scheduler.api.state import ApiState
from scheduler.attempts import attempt_dict
from scheduler.bulk import BulkOperation, BulkResult, TaskFilter
from scheduler.errors import BackendUnavailableError, TaskNotFoundError, TaskStateError
from scheduler.model import ScheduleCursor, Task, TaskKey, TaskState

ACK_TIMEOUT_S = 60.0
_404: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "No such task."}}
_409: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "A task is in a state the change does not fit."}
}

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"], responses=ERROR_RESPONSES)
State = Annotated[ApiState, Depends(api_state)]
Reader = Annotated[TokenEntry, Depends(require(Role.READ))]
Operator = Annotated[TokenEntry, Depends(require(Role.OPERATE))]


def _may(verb: str) -> Any:
    return Depends(require(CHANGE_ROLES[verb]))


def _key_out(key: TaskKey, partitions: int) -> TaskKeyOut:
    return TaskKeyOut(
        ordering_id=key.ordering_id,
        scheduled_time=iso(key.scheduled_ms),
        uniqueness_key=key.uniqueness_key,
        partition=partition_of(key.ordering_id, partitions),
    )


@router.post("", status_code=201, summary="Schedule one task")
def schedule_one(body: TaskIn, state: State, _: Operator) -> Scheduled:
    """Have a task run at its scheduled time: checked as `schedule_task` checks it (a time
    too far in the past, data too large or not JSON are a 400), answered once the log has it."""
    task = Task(body.ordering_id, body.scheduled_time, body.uniqueness_key, body.data)
    try:
        state.client.schedule_task(task).result(timeout=ACK_TIMEOUT_S)
    except TimeoutError:
        raise _not_acknowledged(1) from None
    return Scheduled(count=1, keys=[_key_out(task.key, state.settings.partitions)])


_TASKS_IN = {"$ref": "#/components/schemas/TasksIn"}


@router.post(
    "/batch",
    status_code=201,
    summary="Schedule many tasks",
    openapi_extra={
        "requestBody": {"content": {"application/json": {"schema": _TASKS_IN}}, "required": True}
    },
)
async def schedule_many(request: Request, state: State, _: Operator) -> Scheduled:
    """`schedule_tasks`: every task is checked before any is written, so a refusal schedules
    none of them."""
    raw = await request.body()
    content_type = request.headers.get("content-type")
    return await run_in_threadpool(_schedule_many, raw, content_type, state)


def _schedule_many(raw: bytes, content_type: str | None, state: ApiState) -> Scheduled:
    # The body is `TasksIn` (the OpenAPI document says so), read by `parse_tasks`: orjson and a
    # check by hand per task, not a pydantic model per task (see scheduler/api/bodies.py).
    tasks = parse_tasks(raw, content_type)
    # One thread hand-off a request, which waits for the ack with `result()`: on Kafka the
    # waiting thread serves the delivery reports itself. Awaited on the loop instead, the ack
    # waited for the producer's background poller (50 ms a look while sends are busy), and the
    # POST ran at 0.2 of `schedule_tasks` (docs/benchmarks.md).
    try:
        count = state.client.schedule_tasks(tasks).result(timeout=ACK_TIMEOUT_S)
    except TimeoutError:
        raise _not_acknowledged(len(tasks)) from None
    keys = [_key_out(task.key, state.settings.partitions) for task in tasks[:100]]
    return Scheduled(count=count, keys=keys)


def _not_acknowledged(count: int) -> BackendUnavailableError:
    what = "the task" if count == 1 else "the tasks"
    return BackendUnavailableError(
        f"the log did not acknowledge {what} within {ACK_TIMEOUT_S:g} s (is Kafka reachable? "
        "`scheduler status` says); they may or may not be scheduled: send the same request "
        "again, which is safe since a task's key overwrites itself"
    )


@router.get("", summary="List tasks", response_model=TaskPage)
def list_tasks(
    state: State,
    _: Reader,
    ordering_id: Annotated[
        str | None, Query(description="Only this ordering id's tasks (one partition is read).")
    ] = None,
    partition: Annotated[int | None, Query(ge=0, description="Only this partition's.")] = None,
    task_state: Annotated[
        list[StateName] | None, Query(alias="state", description="Only these states; repeat.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 100,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the page before.")] = None,
) -> Response:
    """Tasks in (partition, schedule) order: pending, running and retrying ones, and finished
    ones whose status is still retained. Without `ordering_id` or `partition`, every partition
    is read, a page at a time."""
    count = state.settings.partitions
    if partition is not None and partition >= count:
        raise ValueError(
            f"partition {partition} does not exist; there are {count} (0 to {count - 1})"
        )
    if ordering_id is not None:
        home = partition_of(ordering_id, count)
        if partition is not None and partition != home:
            raise ValueError(
                f"ordering id {ordering_id!r} lives in partition {home}, not {partition}; "
                "give one of ordering_id and partition"
            )
        partitions = [home]
    else:
        partitions = [partition] if partition is not None else list(range(count))
    states = {TaskState(name) for name in task_state} if task_state else None
    views, more = list_page(
        state.store,
        partitions,
        ordering_id=ordering_id,
        states=states,
        limit=limit,
        after=_decode_cursor(cursor),
    )
    following = _encode_cursor(views[-1].partition, views[-1].task.key.cursor) if more else None
    # `status_dict` is `TaskOut`'s JSON, field for field, written once (api/listing_json.py).
    return json_response({"tasks": [status_dict(view) for view in views], "next_cursor": following})


@router.get("/by-key", summary="Get one task", responses=_404)
def get_task(
    state: State,
    _: Reader,
    ordering_id: str,
    scheduled_time: Annotated[AwareDatetime, Query(description="ISO 8601 with a time zone.")],
    uniqueness_key: str,
) -> TaskDetail:
    """Everything the store holds about one task, with each attempt."""
    task_key = TaskKey(ordering_id, scheduled_time, uniqueness_key)
    partition = partition_of(ordering_id, state.settings.partitions)
    view = find_task(state.store, partition, task_key)
    if view is None:
        raise TaskNotFoundError(
            f"no task {ordering_id} {iso(task_key.scheduled_ms)} {uniqueness_key} in the store "
            f"(partition {partition}); list the ordering id's tasks with "
            f"GET /api/v1/tasks?ordering_id={ordering_id}"
        )
    history = [attempt_dict(attempt) for attempt in state.store.attempts(partition, task_key)]
    return TaskDetail.model_validate({**status_dict(view), "attempt_history": history})


@router.post("/cancel", summary="Cancel pending tasks", responses={**_404, **_409})
def cancel(body: ChangeIn, state: State, _: TokenEntry = _may("cancel")) -> ChangeOut:
    """Pending, running or retrying tasks, given by key, become CANCELLED (a running attempt
    is stopped)."""
    if body.filter is not None:
        raise ValueError("cancel takes tasks by `keys` only, not by `filter`; list them first")
    return _change(state, "cancel", body)


@router.post("/retry", summary="Retry failed tasks", responses={**_404, **_409})
def retry(body: ChangeIn, state: State, _: TokenEntry = _may("retry")) -> ChangeOut:
    """FAILED tasks run again from their first attempt, with the data they failed with."""
    return _change(state, "retry", body)


@router.post("/rerun", summary="Rerun finished tasks", responses={**_404, **_409})
def rerun(body: RerunIn, state: State, _: TokenEntry = _may("rerun")) -> ChangeOut:
    """Finished tasks (succeeded, failed or cancelled) run once more from their first attempt."""
    return _change(state, "rerun", body, data=body.data)


@router.post("/drop", summary="Drop failed tasks", responses={**_404, **_409})
def drop(body: ChangeIn, state: State, _: TokenEntry = _may("drop")) -> ChangeOut:
    """FAILED tasks are forgotten: their status rows are deleted and they never run again."""
    return _change(state, "drop", body)


def _change(
    state: ApiState, verb: str, body: ChangeIn, data: dict[str, Any] | None = None
) -> ChangeOut:
    partitions = state.settings.partitions
    chosen = body.filter is not None and any(
        value is not None for value in body.filter.model_dump().values()
    )
    if (body.keys is None) == (not chosen):
        raise ValueError(
            "give the tasks as `keys` or select them with a `filter` (ordering_id, partition, "
            "states, scheduled_from, scheduled_before), one of the two; `dry_run` shows what a "
            "filter selects"
        )
    if body.keys is not None:
        keys = [TaskKey(k.ordering_id, k.scheduled_time, k.uniqueness_key) for k in body.keys]
        check_changes(state.store, partitions, keys, verb)
        if not body.dry_run:
            request_changes(state.client, keys, verb, data=data, timeout=ACK_TIMEOUT_S)
        sample = [_key_out(key, partitions) for key in keys[:10]]
        return ChangeOut(operation=verb, count=len(keys), dry_run=body.dry_run, sample=sample)
    assert body.filter is not None
    where = TaskFilter(
        ordering_id=body.filter.ordering_id,
        states=None if body.filter.states is None else [TaskState(s) for s in body.filter.states],
        scheduled_from=body.filter.scheduled_from,
        scheduled_before=body.filter.scheduled_before,
        partition=body.filter.partition,
    )
    result: BulkResult
    try:
        if verb == BulkOperation.RERUN:
            result = state.client.rerun_tasks(where, data=data, dry_run=body.dry_run)
        else:
            result = getattr(state.client, f"{verb}_tasks")(where, dry_run=body.dry_run)
    except TaskStateError as error:
        # A filter on states the change does not apply to: the request is wrong, no task is.
        raise ValueError(str(error)) from None
    return ChangeOut(
        operation=verb,
        count=result.count,
        dry_run=result.dry_run,
        sample=[_key_out(key, partitions) for _, key in result.sample],
    )


def _encode_cursor(partition: int, cursor: ScheduleCursor) -> str:
    raw = json.dumps([partition, *cursor], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii")


def _decode_cursor(text: str | None) -> tuple[int, ScheduleCursor] | None:
    if text is None:
        return None
    try:
        partition, ms, ordering_id, uniqueness_key = json.loads(base64.urlsafe_b64decode(text))
        if not all(isinstance(v, int) for v in (partition, ms)) or not all(
            isinstance(v, str) for v in (ordering_id, uniqueness_key)
        ):
            raise TypeError
    except (ValueError, TypeError, binascii.Error):
        raise HTTPException(
            400,
            f"cursor {text!r} is not a `next_cursor` this API gave; pass one unchanged, or "
            "leave it out for the first page",
        ) from None
    return partition, (ms, ordering_id, uniqueness_key)
