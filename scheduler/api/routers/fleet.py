"""`/api/v1/fleet`: the worker group as `scheduler group status` shows it
(`scheduler.fleet.status`): who owns each partition, the group's lag, the work due now and soon."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from scheduler.api.auth import Role, TokenEntry
from scheduler.api.deps import api_state, require
from scheduler.api.errors import ERROR_RESPONSES
from scheduler.api.schemas import FleetOut, PartitionOut, WorkerOut
from scheduler.api.state import ApiState
from scheduler.fleet.status import group_status, workers

router = APIRouter(prefix="/api/v1/fleet", tags=["fleet"], responses=ERROR_RESPONSES)
State = Annotated[ApiState, Depends(api_state)]
Reader = Annotated[TokenEntry, Depends(require(Role.READ))]


def fleet(state: ApiState) -> FleetOut:
    """The group now; recorded in the state's history for the dashboard's sparklines."""
    rows = group_status(state.client.log, state.store, state.settings)
    state.history.record(rows)
    return FleetOut(
        group=state.settings.group_id,
        topic=state.settings.topic,
        workers=[WorkerOut(name=name, partitions=owned) for name, owned in workers(rows).items()],
        partitions=[PartitionOut.model_validate(row.as_dict()) for row in rows],
        lag=sum(row.lag for row in rows),
        in_flight=sum(row.in_flight for row in rows),
        overdue=sum(row.overdue for row in rows),
    )


@router.get("", summary="The worker group")
def get_fleet(state: State, _: Reader) -> FleetOut:
    """Workers, partition owners, offsets, consumer lag and due work, with totals."""
    return fleet(state)


@router.get("/partitions", summary="Partitions")
def get_partitions(state: State, _: Reader) -> list[PartitionOut]:
    """Per partition: owner, committed and end offsets, lag, in-flight and overdue tasks."""
    return fleet(state).partitions


@router.get("/workers", summary="Workers")
def get_workers(state: State, _: Reader) -> list[WorkerOut]:
    """The group's members that own partitions, each with its partitions."""
    return fleet(state).workers
