"""The probes of `scheduler worker` processes on Kafka and Cassandra: a spare worker (more workers
than partitions) is ready, and takes the partition over when its owner is killed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler import Task
from scheduler.client import SchedulerClient
from scheduler.fleet import as_key_tuple
from tests.distributed.conftest import START_TIMEOUT_S, wait_for
from tests.http import free_port, probe

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]


def ready(port: int) -> dict[str, Any] | None:
    answer = probe(port, "/readyz")
    return answer[1] if answer is not None and answer[0] == 200 else None


def test_a_spare_worker_is_ready_and_takes_over_when_the_owner_dies(fleet):
    one_partition = {"partitions": "1"}  # the first worker creates the topic with one partition
    owner_port, spare_port = free_port(), free_port()
    owner = fleet.worker("owner", metrics_port=str(owner_port), **one_partition)
    owner.wait_until_owning(START_TIMEOUT_S)
    assert wait_for(lambda: ready(owner_port), 30)["partitions"] == [0]
    alive = probe(owner_port, "/healthz")
    assert alive is not None and alive[0] == 200 and alive[1]["live"]

    spare = fleet.worker("spare", metrics_port=str(spare_port), **one_partition)
    # Ready with nothing to do: it joined the group, which gave it no partition.
    joined = wait_for(lambda: ready(spare_port), START_TIMEOUT_S)
    assert joined["partitions"] == [] and joined["state"] == "running", joined
    assert ready(owner_port)["partitions"] == [0]  # cooperative: the owner kept it

    with SchedulerClient(log=fleet.log) as producer:
        owner.kill()
        task = Task("after-the-owner", datetime.now(UTC), "k")
        producer.schedule_task(task).result(30)
    # The group gives the spare the partition once the owner's session times out (10 s).
    # The probe lists the partition as soon as the group gives it, a moment before the worker's
    # "assigned partitions" line (its listener first checks the partition's committed offset).
    took_over = wait_for(lambda: (ready(spare_port) or {}).get("partitions") == [0] or None, 60)
    assert took_over and wait_for(lambda: spare.assigned_partitions() == {0}, 10)
    report = fleet.wait_until_executed([as_key_tuple(task.key)], timeout=60)
    assert not report.missing, report.summary()
    assert probe(owner_port, "/healthz") is None  # killed: nothing answers, as a probe sees it
