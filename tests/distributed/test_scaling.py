"""Workers join and leave a busy group: nothing is lost, nothing runs twice, order holds.

Also measures the rebalance pauses the design brief promises to keep short: a joining worker's
moved partitions should resume within 2 s, and partitions that stay put should not pause.
"""

from __future__ import annotations

import time

import pytest

from scheduler.fleet import LoadGenerator, measure_rebalance, read_history
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

RATE_PER_S = 150
ORDERING_IDS = 20
PHASE_S = 7.0
"""Steady load between two changes of the group."""
RESUME_BOUND_MS = 8_000
KEPT_GAP_BOUND_MS = 4_000


def rebalance_began(fleet: Fleet, after_ms: int) -> int | None:
    """When the first worker logged a revocation after `after_ms`."""
    moments = [
        moment
        for worker in fleet.workers
        for moment, kind, _ in worker.partition_events()
        if kind in ("revoked", "lost") and moment >= after_ms
    ]
    return min(moments, default=None)


@pytest.mark.parametrize("group_protocol", GROUP_PROTOCOLS)
def test_workers_joining_and_leaving_under_load_lose_nothing_and_run_nothing_twice(
    fleet: Fleet, group_protocol: str
) -> None:
    fleet.use_group_protocol(group_protocol)
    first = fleet.worker("w1")
    first.wait_until_owning(START_TIMEOUT_S, at_least=PARTITIONS)
    load = LoadGenerator(
        fleet.client(),
        ordering_ids=ORDERING_IDS,
        rate_per_s=RATE_PER_S,
        # Ended a phase after the last change (below), however long the joins took; this bound
        # only ends a run that hangs.
        duration_s=4 * PHASE_S + 6 + 3 * START_TIMEOUT_S,
        lead_ms=1000,
        data=some_sleep(),
    ).start()
    time.sleep(PHASE_S)

    changes: list[tuple[str, int]] = []
    """(what happened, when it was asked for)"""
    changes.append(("w2 joined", now_ms()))
    second = fleet.worker("w2")
    second.wait_until_owning(START_TIMEOUT_S)
    time.sleep(PHASE_S)

    changes.append(("w3 joined", now_ms()))
    third = fleet.worker("w3")
    third.wait_until_owning(START_TIMEOUT_S)
    time.sleep(PHASE_S)

    changes.append(("w1 left (SIGTERM)", now_ms()))
    assert first.stop(60) == 0, first.output()[-3000:]

    def all_owned() -> bool:
        return second.assigned_partitions() | third.assigned_partitions() == set(range(PARTITIONS))

    assert wait_for(all_owned, 60), (second.output()[-2000:], third.output()[-2000:])
    # The load outlasts the last change by a phase, as it does the others: a fixed duration let
    # slow joins on a loaded machine push the leave to the load's last second, and then nothing
    # ran in its window to show a partition moving (scripts/faults.sh, 2026-11-27).
    time.sleep(PHASE_S)
    load.stop()

    accepted = load.join()
    assert load.failed == [], load.failed[:5]
    report = fleet.wait_until_executed(accepted, timeout=120)
    executions = read_history(fleet.record)

    print(f"\n[scaling] {report.summary()}")
    rebalances = []
    for index, (what, asked_ms) in enumerate(changes):
        # A join begins with the old owners' revocation; a leave with the SIGTERM (the leaver
        # stops its partitions before it logs their revocation).
        joined = what.endswith("joined")
        began = (rebalance_began(fleet, asked_ms) if joined else None) or asked_ms
        following = [t for _, t in changes[index + 1 :]]
        until = min([*following, began + 6_000, load.finished_ms or began + 6_000])
        pauses = measure_rebalance(executions, began_ms=began, until_ms=until)
        print(f"[scaling] {what}: {pauses.summary()}")
        rebalances.append(pauses)
    assert report.missing == []
    assert report.order_violations == []
    assert report.concurrent_violations == []
    assert report.duplicates == {}
    assert report.unfinished == []
    # Loose bounds, for a loaded 2-core machine: the targets (moved partitions resume within
    # 2 s, kept ones never pause) are measured by the benchmark; these catch a stop-the-world
    # rebalance like the seed's ~16 s one.
    for pauses in rebalances:
        assert pauses.moved, "every change should have moved partitions"
        assert max(pauses.resumed_after_ms.values()) < RESUME_BOUND_MS, pauses.summary()
        assert pauses.kept_max_gap_ms < KEPT_GAP_BOUND_MS, pauses.summary()
        assert pauses.stalled == [], pauses.summary()
