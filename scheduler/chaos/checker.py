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
    frozen_worker: int | None = None
    """The pid of the worker the fault froze (SIGSTOP), if it froze one: an attempt in flight
    on it when the fault began cannot be stopped, and finishes after SIGCONT while the next
    owner may already run later tasks of its ordering id (the documented window)."""


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
    """Two attempts of one ordering id running at the same time, unexplained (must be 0)."""
    explained_overlaps: list[tuple[Execution, Execution, str]] = field(default_factory=list)
    """Overlaps whose first attempt was frozen mid-run by a fault, each with that reason
    (``in flight at F``): allowed, since nothing can stop a frozen process."""
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
        overlap_reasons: dict[str, int] = defaultdict(int)
        for *_, why in self.explained_overlaps:
            overlap_reasons[why] += 1
        if self.explained_overlaps:
            overlap_reasons["unexplained"] = len(self.overlaps)
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
            f"overlaps              {len(self.overlaps) + len(self.explained_overlaps)}"
            + "".join(f"; {why} {n}" for why, n in sorted(overlap_reasons.items())),
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
        faults=list(faults),
    )
    frozen = _frozen_in_flight(attempts, faults)
    thawed = [e for e in attempts if e not in frozen]
    explained, unexplained = _overlaps_of_frozen(attempts, frozen)
    report.overlaps = _finished_overlaps(thawed) + _open_overlaps(attempts, thawed) + unexplained
    report.explained_overlaps = explained
    report.unacknowledged_runs = sorted({e.key for e in attempts if e.key not in sent_set})
    report.duplicates = {key: _reason(key, attempts, faults) for key in sorted(history.duplicates)}
    report.longest_pause_ms = longest_pauses(attempts, load_window)
    return report


def _frozen_in_flight(
    attempts: list[Execution], faults: Collection[Fault]
) -> dict[Execution, Fault]:
    """The attempts a fault froze mid-run (on its ``frozen_worker``, begun before the fault
    and not ended before it), each with that fault."""
    found: dict[Execution, Fault] = {}
    for fault in faults:
        if fault.frozen_worker is None:
            continue
        for e in attempts:
            if (
                e.worker == fault.frozen_worker
                and e.start_ms <= fault.began_ms
                and (e.end_ms is None or e.end_ms >= fault.began_ms)
            ):
                found.setdefault(e, fault)
    return found


def _by_ordering_id(attempts: Iterable[Execution]) -> dict[str, list[Execution]]:
    by_id: dict[str, list[Execution]] = defaultdict(list)
    for e in sorted(attempts, key=lambda e: e.start_ms):
        by_id[e.ordering_id].append(e)
    return by_id


def _finished_overlaps(attempts: list[Execution]) -> list[tuple[Execution, Execution]]:
    """Attempts of one ordering id that began before the one still running (the one that
    ends last so far) had ended: the first of each pair is that running one."""
    found = []
    for runs in _by_ordering_id(attempts).values():
        latest: Execution | None = None
        for e in runs:
            if latest is not None and latest.end_ms and e.start_ms < latest.end_ms:
                found.append((latest, e))
            if latest is None or (e.end_ms or 0) > (latest.end_ms or 0):
                latest = e
    return found


def _overlaps_of_frozen(
    attempts: list[Execution], frozen: dict[Execution, Fault]
) -> tuple[list[tuple[Execution, Execution, str]], list[tuple[Execution, Execution]]]:
    """The overlaps of each frozen attempt with the others of its ordering id: explained (with
    the reason ``in flight at F``) when the other ran on another worker and began after the
    freeze, while the frozen one had yet to end (or, if it never ended, while its worker still
    recorded); unexplained when the other began before the freeze, or on the same worker."""
    last_seen = _last_seen(attempts)
    by_id = _by_ordering_id(attempts)
    explained: list[tuple[Execution, Execution, str]] = []
    unexplained: list[tuple[Execution, Execution]] = []
    for run, fault in frozen.items():
        until = run.end_ms if run.end_ms is not None else last_seen[run.worker]
        for other in by_id[run.ordering_id]:
            if other == run:
                continue
            if other.start_ms <= run.start_ms:
                if other not in frozen and other.end_ms is not None and run.start_ms < other.end_ms:
                    unexplained.append((other, run))
            elif other.start_ms < until:
                if other.worker != run.worker and other.start_ms >= fault.began_ms:
                    explained.append((run, other, f"in flight at {fault.what}"))
                else:
                    unexplained.append((run, other))
    explained.sort(key=lambda pair: (pair[0].start_ms, pair[1].start_ms))
    return explained, unexplained


def _last_seen(attempts: list[Execution]) -> dict[int, int]:
    """Per worker, the last time it recorded anything."""
    last_seen: dict[int, int] = defaultdict(int)
    for e in attempts:
        last_seen[e.worker] = max(last_seen[e.worker], e.start_ms, e.end_ms or 0)
    return last_seen


def _open_overlaps(
    attempts: list[Execution], candidates: list[Execution]
) -> list[tuple[Execution, Execution]]:
    """Attempts among ``candidates`` that never recorded their end, overlapping a later
    attempt of their ordering id on another worker while their own worker was still alive (it
    recorded something after that attempt began). A worker killed mid-attempt records nothing
    after its death, so the next owner's run of the task, seconds later, is no overlap."""
    last_seen = _last_seen(attempts)
    by_id = _by_ordering_id(attempts)
    found = []
    for open_run in (e for e in candidates if e.end_ms is None):
        alive_until = last_seen[open_run.worker]
        found += [
            (open_run, other)
            for other in by_id[open_run.ordering_id]
            if other.worker != open_run.worker and open_run.start_ms <= other.start_ms < alive_until
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
