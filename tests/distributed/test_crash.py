"""A worker killed with SIGKILL while tasks run: its partitions move, nothing is lost, order holds,
and only tasks that finished just before the crash (their status not yet written) run again."""

from __future__ import annotations

import time

import pytest

from scheduler.fleet import LoadGenerator, read_history
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

UNFLUSHED_WINDOW_MS = 1_000
"""A duplicate must be a task whose first run ended this close before the kill: its SUCCEEDED
status was still being buffered or written (`status_flush_ms` plus a Cassandra write; measured
at up to ~150 ms on a loaded 2-core machine). So the number of duplicates is bounded by what
the victim completes in that window (pool size x tasks per attempt time), not by the pool alone."""


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
    late_duplicates = {
        key: count
        for key, count in report.duplicates.items()
        if not any(
            e.key == key
            and e.ok
            and e.worker == victim.pid
            and e.end_ms is not None
            and killed_ms - UNFLUSHED_WINDOW_MS <= e.end_ms <= killed_ms
            for e in executions
        )
    }
    print(
        f"\n[crash] {report.summary()}; in flight at the kill {len(in_flight)}, "
        f"duplicates {len(report.duplicates)}, "
        f"the victim's partitions {sorted(victims_partitions)} "
        f"ran again {recovery_ms} ms after the kill"
    )
    assert report.missing == []
    assert report.order_violations == []
    assert report.concurrent_violations == []
    assert in_flight, "the kill was meant to hit running attempts"
    assert late_duplicates == {}, "only tasks that finished just before the kill may run twice"
