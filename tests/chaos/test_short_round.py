"""CI's short round under faults (issue 45): a few scenarios, briefly, on the replicated cluster.
The long rounds are `scheduler chaos SCENARIO --duration S` (docs/reliability.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.chaos.run import ChaosRun
from scheduler.chaos.scenarios import SCENARIOS
from scheduler.services import launcher

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]

SHORT_S = 20.0


@pytest.fixture(scope="module", autouse=True)
def replicated_cluster() -> None:
    """The cluster of `scheduler services up --cluster` (started here if it is not running)."""
    launcher.up_cluster()


@pytest.mark.parametrize("scenario", ["leader-kill"])
def test_no_acknowledged_task_is_lost_reordered_or_run_twice_unexplained_under_faults(
    scenario: str, tmp_path: Path
) -> None:
    run = ChaosRun(tmp_path / scenario, scenario)
    try:
        SCENARIOS[scenario](run, SHORT_S)
        report = run.finish()
    finally:
        run.close()
    print(f"\n{report.render()}")
    assert report.faults, "the scenario injected no fault"
    assert report.acknowledged > 0 and report.acknowledged == report.sent
    assert report.lost == []
    assert report.unacknowledged_runs == []
    assert report.order_violations == []
    assert report.overlaps == []
    assert report.unexplained == []
