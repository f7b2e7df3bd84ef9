"""A worker killed with SIGKILL while tasks run: its partitions move, nothing is lost, order holds,
and the only tasks that run twice are those whose success the victim had not yet written."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from scheduler.fleet import Execution, KeyTuple, LoadGenerator, read_history
from scheduler.model import Attempt, AttemptOutcome, TaskKey, TaskState
from tests.distributed.conftest import (
    GROUP_PROTOCOLS,
    PARTITIONS,
    START_TIMEOUT_S,
    Fleet,
    now_ms,
    some_sleep,
    wait_for,
)

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]


def succeeded_in_store(fleet: Fleet, executions: list[Execution], worker: int) -> set[KeyTuple]:
    """The keys `worker` ran successfully whose SUCCEEDED status the store holds now.

    Read right after the kill, before the survivor takes the victim's partitions (that takes a
    session timeout, about 10 s): these are the successes the victim made durable. A success
    still in its status buffer (`status_flush_ms`, then a Cassandra write, which can take over a
    second on a loaded machine) is lost with the process, and that task runs again."""
    by_partition: dict[int, list[TaskKey]] = defaultdict(list)
    for e in executions:
        if e.worker == worker and e.ok:
            by_partition[e.partition].append(TaskKey.from_ms(*e.key))
    durable: set[KeyTuple] = set()
    with fleet.store() as store:
        store.open(create_schema=False)
        for partition, keys in by_partition.items():
            for key, status in store.fetch_statuses(partition, keys).items():
                if status.state is TaskState.SUCCEEDED:
                    durable.add((key.ordering_id, key.scheduled_ms, key.uniqueness_key))
    return durable


def running_in_store(fleet: Fleet, executions: list[Execution], worker: int) -> set[Execution]:
    """`worker`'s attempts that had not ended and whose RUNNING status the store holds now
    (read right after the kill, like `succeeded_in_store`)."""
    open_attempts = [e for e in executions if e.worker == worker and e.end_ms is None]
    found: set[Execution] = set()
    with fleet.store() as store:
        store.open(create_schema=False)
        for e in open_attempts:
            key = TaskKey.from_ms(*e.key)
            status = store.fetch_statuses(e.partition, [key]).get(key)
            if status is not None and (status.state, status.attempts) == (
                TaskState.RUNNING,
                e.attempt,
            ):
                found.add(e)
    return found


def attempt_records(fleet: Fleet, executions: set[Execution]) -> dict[Execution, list[Attempt]]:
    with fleet.store() as store:
        store.open(create_schema=False)
        return {e: store.attempts(e.partition, TaskKey.from_ms(*e.key)) for e in executions}


@pytest.mark.parametrize("group_protocol", GROUP_PROTOCOLS)
def test_a_worker_killed_mid_execution_loses_nothing_and_reruns_only_tasks_in_flight(
    fleet: Fleet, group_protocol: str
) -> None:
    fleet.use_group_protocol(group_protocol)
    victim = fleet.worker("w1")
    survivor = fleet.worker("w2")
    victim.wait_until_owning(START_TIMEOUT_S)
    survivor.wait_until_owning(START_TIMEOUT_S)
    load = LoadGenerator(
        fleet.client(),
        ordering_ids=20,
        rate_per_s=150,
        duration_s=30,
        lead_ms=1000,
        data=some_sleep(every=7, sleep_ms=300),
    ).start()
    time.sleep(8)

    def victim_busy() -> bool:
        return any(e.worker == victim.pid and e.end_ms is None for e in read_history(fleet.record))

    assert wait_for(victim_busy, 30, interval=0.05), "the victim never had an attempt in flight"
    killed_ms = now_ms()
    victim.kill()
    victims_partitions = victim.assigned_partitions()
    at_kill = read_history(fleet.record)
    durable = succeeded_in_store(fleet, at_kill, victim.pid)
    left_running = running_in_store(fleet, at_kill, victim.pid)
    snapshot_ms = now_ms()
    unwritten = {e.key for e in at_kill if e.worker == victim.pid and e.ok and e.key not in durable}

    def survivor_owns_everything() -> bool:
        return survivor.assigned_partitions() == set(range(PARTITIONS))

    assert wait_for(survivor_owns_everything, 60), survivor.output()[-3000:]
    accepted = load.join()
    assert load.failed == [], load.failed[:5]
    report = fleet.wait_until_executed(accepted, timeout=120)
    executions = read_history(fleet.record)

    in_flight = [e for e in report.unfinished if e.worker == victim.pid]
    resumed = [
        e.start_ms
        for e in executions
        if e.worker == survivor.pid and e.partition in victims_partitions and e.start_ms > killed_ms
    ]
    recovery_ms = min(resumed) - killed_ms if resumed else None
    # A task may run twice only if the victim ran it and its success was not in the store yet.
    late_duplicates = {key: n for key, n in report.duplicates.items() if key not in unwritten}
    print(
        f"\n[crash] {report.summary()}; in flight at the kill {len(in_flight)}, "
        f"duplicates {len(report.duplicates)}, "
        f"the victim's partitions {sorted(victims_partitions)} "
        f"ran again {recovery_ms} ms after the kill; successes of the victim not yet written "
        f"{len(unwritten)}, written {len(durable)}; left running in the store "
        f"{len(left_running)}"
    )
    assert report.missing == []
    assert report.order_violations == []
    assert report.concurrent_violations == []
    assert in_flight, "the kill was meant to hit running attempts"
    assert recovery_ms is None or snapshot_ms < killed_ms + recovery_ms, (
        "the store was read after the survivor took over: the victim's writes are not told "
        "apart from the survivor's"
    )
    # What the victim left RUNNING, the survivor closed as interrupted and ran again.
    for e, records in attempt_records(fleet, left_running).items():
        by_number = {record.number: record for record in records}
        closed = by_number.get(e.attempt)
        assert closed is not None and closed.outcome is AttemptOutcome.INTERRUPTED, (e, records)
        assert closed.worker == "w1" and closed.started_ms is not None, (e, records)
        assert e.attempt + 1 in by_number and by_number[e.attempt + 1].worker == "w2", records
    assert late_duplicates == {}, (
        "a task ran twice that the victim never finished, or whose success it had written; "
        "their attempts "
        f"(times from the kill, victim {victim.pid}):\n"
        + "\n".join(
            f"  {e.key} attempt {e.attempt} worker {e.worker} partition {e.partition} "
            f"start {e.start_ms - killed_ms:+d} ms end "
            f"{'-' if e.end_ms is None else f'{e.end_ms - killed_ms:+d} ms'} ok {e.ok}"
            for e in executions
            if e.key in late_duplicates
        )
        + "\nthe survivor's log:\n"
        + survivor.output()[-4000:]
    )
