"""The verdict on a run under faults, in the spirit of Jepsen's checkers.

Producers record what they sent and what the log acknowledged (`LoadGenerator`), executors
record every attempt's start and end with worker and attempt (`recording_executor`), the
scenario records when each fault began and ended. `check` reads all three after the run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from scheduler.fleet.history import Execution, KeyTuple, check_history

GRACE_MS = 15_000
"""How long after a fault ends its effects may still explain a duplicate: a session timeout
(10 s) for the group to notice a lost worker, plus a status flush."""


@dataclass(frozen=True)
class Fault:
    """One injected fault: what, and from when to when (epoch ms)."""

    what: str
    began_ms: int
    ended_ms: int


@dataclass
class ChaosReport:
    """What `check` found; `ok` holds when every must-be-zero count is zero."""

    scenario: str
    sent: int
    acknowledged: int
    indeterminate: int
    """Sends whose future failed: the log may or may not have the task, so either is fine."""
    attempts: int
    lost: list[KeyTuple] = field(default_factory=list)
    """Acknowledged tasks that never succeeded (must be 0)."""
    unacknowledged_runs: list[KeyTuple] = field(default_factory=list)
    """Tasks that ran though no producer ever sent them (must be 0)."""
    order_violations: list[tuple[KeyTuple, KeyTuple]] = field(default_factory=list)
    """Pairs of one ordering id whose first successful runs started out of key order (0)."""
    overlaps: list[tuple[Execution, Execution]] = field(default_factory=list)
    """Two attempts of one ordering id running at the same time (must be 0)."""
    duplicates: dict[KeyTuple, str] = field(default_factory=dict)
    """Tasks that succeeded more than once, each with the reason it is allowed, or
    ``unexplained`` (a bug)."""
    longest_pause_ms: dict[int, int] = field(default_factory=dict)
    """Per partition: the longest time between two attempt starts while the load ran."""
    faults: list[Fault] = field(default_factory=list)

    @property
    def unexplained(self) -> list[KeyTuple]:
        return [key for key, why in self.duplicates.items() if why == "unexplained"]

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.unacknowledged_runs
            or self.order_violations
            or self.overlaps
            or self.unexplained
        )

    def render(self) -> str:
        """The report `scheduler chaos` prints (format: docs/reliability.md)."""
        reasons: dict[str, int] = defaultdict(int)
        for why in self.duplicates.values():
            reasons[why] += 1
        pauses = " ".join(f"p{p}={ms}" for p, ms in sorted(self.longest_pause_ms.items()))
        lines = [
            f"scenario              {self.scenario}",
            f"faults                {len(self.faults)}: "
            + ", ".join(sorted({f.what for f in self.faults})),
            f"sent                  {self.sent}",
            f"acknowledged          {self.acknowledged}",
            f"indeterminate         {self.indeterminate}",
            f"attempts              {self.attempts}",
            f"lost                  {len(self.lost)}",
            f"unacknowledged runs   {len(self.unacknowledged_runs)}",
            f"order violations      {len(self.order_violations)}",
            f"overlaps              {len(self.overlaps)}",
            f"duplicates            {len(self.duplicates)}"
            + "".join(f"; {why} {n}" for why, n in sorted(reasons.items())),
            f"longest pause (ms)    {pauses or '-'}",
            f"verdict               {'OK' if self.ok else 'FAILED'}",
        ]
        for title, items in (
            ("lost", self.lost),
            ("unacknowledged run", self.unacknowledged_runs),
            ("order violation", self.order_violations),
            ("overlap", self.overlaps),
            ("unexplained duplicate", self.unexplained),
        ):
            lines += [f"  {title}: {item}" for item in list(items)[:5]]
        return "\n".join(lines)


def check(
    scenario: str,
    *,
    sent: Collection[KeyTuple],
    acknowledged: Collection[KeyTuple],
    executions: Iterable[Execution],
    faults: Collection[Fault],
    load_window: tuple[int, int] | None = None,
) -> ChaosReport:
    """Judge one run. ``load_window`` (epoch ms) bounds the pause measurement."""
    attempts = list(executions)
    history = check_history(acknowledged, attempts)
    sent_set = set(sent)
    report = ChaosReport(
        scenario=scenario,
        sent=len(sent_set),
        acknowledged=len(set(acknowledged)),
        indeterminate=len(sent_set - set(acknowledged)),
        attempts=len(attempts),
        lost=history.missing,
        order_violations=history.order_violations,
        overlaps=history.concurrent_violations + _open_overlaps(attempts),
        faults=list(faults),
    )
    report.unacknowledged_runs = sorted({e.key for e in attempts if e.key not in sent_set})
    report.duplicates = {key: _reason(key, attempts, faults) for key in sorted(history.duplicates)}
    report.longest_pause_ms = longest_pauses(attempts, load_window)
    return report


def _open_overlaps(attempts: list[Execution]) -> list[tuple[Execution, Execution]]:
    """Attempts that never recorded their end, overlapping a later attempt of their ordering id
    on another worker while their own worker was still alive (it recorded something after that
    attempt began). A worker killed mid-attempt records nothing after its death, so the next
    owner's run of the task, seconds later, is no overlap."""
    last_seen: dict[int, int] = defaultdict(int)
    for e in attempts:
        last_seen[e.worker] = max(last_seen[e.worker], e.start_ms, e.end_ms or 0)
    by_id: dict[str, list[Execution]] = defaultdict(list)
    for e in attempts:
        by_id[e.ordering_id].append(e)
    found = []
    for runs in by_id.values():
        for open_run in (e for e in runs if e.end_ms is None):
            alive_until = last_seen[open_run.worker]
            found += [
                (open_run, other)
                for other in runs
                if other.worker != open_run.worker
                and open_run.start_ms <= other.start_ms < alive_until
            ][:1]
    return found


def _reason(key: KeyTuple, attempts: list[Execution], faults: Collection[Fault]) -> str:
    """Why ``key`` may have run twice: its first success was in flight when a fault began, or
    had finished but its status was not yet written (the next owner re-read the task)."""
    first = min((e for e in attempts if e.key == key and e.ok), key=lambda e: e.start_ms)
    ended = first.end_ms or first.start_ms
    for fault in faults:
        if first.start_ms <= fault.began_ms <= ended:
            return f"in flight at {fault.what}"
    for fault in faults:
        if fault.began_ms - GRACE_MS <= ended <= fault.ended_ms + GRACE_MS:
            return f"finished but unwritten at {fault.what}"
    return "unexplained"


def longest_pauses(
    attempts: Iterable[Execution], window: tuple[int, int] | None = None
) -> dict[int, int]:
    """Per partition, the longest gap between consecutive attempt starts inside ``window``."""
    starts: dict[int, list[int]] = defaultdict(list)
    for e in attempts:
        if window is None or window[0] <= e.start_ms <= window[1]:
            starts[e.partition].append(e.start_ms)
    return {
        partition: max((b - a for a, b in pairwise(sorted(times))), default=0)
        for partition, times in starts.items()
    }
