"""How a rebalance looked from the tasks' side: when moved partitions ran again, and the largest
gap of the partitions that stayed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from scheduler.fleet.history import Execution

# -- rebalance pauses -------------------------------------------------------------------------


@dataclass
class RebalanceReport:
    """How one rebalance looked from the tasks' side."""

    began_ms: int
    """When it began (the old owner's revocation, or the kill)."""
    moved: dict[int, tuple[int, int]]
    """Partition -> (old owner's pid, new owner's pid)."""
    resumed_after_ms: dict[int, int]
    """Moved partition -> ms from `began_ms` to its first execution on the new owner."""
    handover_gap_ms: dict[int, int]
    """Moved partition -> ms from its last execution's end on the old owner to its first start
    on the new one: how long the partition's tasks stood still."""
    kept_max_gap_ms: int
    """Largest gap between execution starts on a partition that stayed, during the rebalance."""
    baseline_max_gap_ms: int
    """The same, over every partition, in a quiet window of the same length just before."""
    stalled: list[int] = field(default_factory=list)
    """Partitions busy just before the rebalance that ran nothing in the window."""

    def summary(self) -> str:
        resumed = sorted(self.resumed_after_ms.values())
        gaps = sorted(self.handover_gap_ms.values())
        return (
            f"moved {sorted(self.moved)}: resumed {_spread(resumed)} ms after the rebalance "
            f"began, handover gap {_spread(gaps)} ms; kept partitions' largest gap "
            f"{self.kept_max_gap_ms} ms (baseline {self.baseline_max_gap_ms} ms)"
            + (f"; stalled {self.stalled}" if self.stalled else "")
        )


def _spread(values: list[int]) -> str:
    if not values:
        return "-"
    return f"{values[0]}..{values[-1]}" if len(values) > 1 else str(values[0])


def measure_rebalance(
    executions: Iterable[Execution], *, began_ms: int, until_ms: int
) -> RebalanceReport:
    """Which partitions moved in the rebalance that began at `began_ms`, how soon they ran
    again, and whether the others paused; `until_ms` ends the window (before the next change).

    A partition's owner before is the worker of its last attempt started before `began_ms`, its
    owner after the worker of its last attempt started in the window. Needs a steady load on
    every partition, or idle partitions look like pauses.
    """
    window = until_ms - began_ms
    before: dict[int, Execution] = {}
    starts: dict[int, list[Execution]] = defaultdict(list)
    baseline: dict[int, list[int]] = defaultdict(list)
    for execution in sorted(executions, key=lambda e: e.start_ms):
        if execution.start_ms < began_ms:
            before[execution.partition] = execution
            if execution.start_ms >= began_ms - window:
                baseline[execution.partition].append(execution.start_ms)
        elif execution.start_ms <= until_ms:
            starts[execution.partition].append(execution)
    report = RebalanceReport(began_ms, {}, {}, {}, 0, _max_gap(baseline.values()))
    kept: list[list[int]] = []
    for partition, runs in starts.items():
        old = before.get(partition)
        new_owner = runs[-1].worker
        if old is None or old.worker == new_owner:
            kept.append([*([old.start_ms] if old else []), *(e.start_ms for e in runs)])
            continue
        first = next(e for e in runs if e.worker == new_owner)
        old_end = max(
            (e.end_ms or e.start_ms for e in [old, *runs] if e.worker == old.worker),
            default=old.start_ms,
        )
        report.moved[partition] = (old.worker, new_owner)
        report.resumed_after_ms[partition] = first.start_ms - began_ms
        report.handover_gap_ms[partition] = first.start_ms - old_end
    report.kept_max_gap_ms = _max_gap(kept)
    report.stalled = sorted(set(baseline) - set(starts))
    return report


def _max_gap(series: Iterable[list[int]]) -> int:
    return max((b - a for starts in series for a, b in pairwise(sorted(starts))), default=0)
