"""Consumer groups of the embedded log: a sticky assignor and cooperative hand-over.

Like Kafka's cooperative-sticky protocol, a rebalance only changes each member's *target*; a
partition moves in two steps. Its old owner revokes it inside its own `poll` (its listener may
commit there), and only then may the new owner take it, inside *its* `poll`. So a partition never
has two owners, partitions that stay are never touched, and every callback runs on the thread
that polls the consumer it belongs to. All state here is guarded by the log's condition, which
`poll` waits on for records and hand-overs alike.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.logs.abc import LogConsumer, LogRecord, RebalanceListener

if TYPE_CHECKING:
    from scheduler.logs.embedded import EmbeddedTaskLog


@dataclass(slots=True)
class _Member:
    """One consumer's standing in its group."""

    member_id: str
    """Unique per consumer; sorts the members for the assignor."""
    client_id: str
    """Shown as the owner in `describe_group`."""
    target: set[int] = field(default_factory=set)
    """What the assignor wants this member to own."""
    owned: set[int] = field(default_factory=set)
    """What it owns now: changed only by its own `poll` (and `close`)."""


class GroupCoordinator:
    """The members of every group of one embedded topic."""

    def __init__(self, log: EmbeddedTaskLog) -> None:
        self._log = log
        self._groups: dict[str, dict[str, _Member]] = {}

    def join(self, group_id: str, member: _Member) -> None:
        with self._log.cond:
            self._groups.setdefault(group_id, {})[member.member_id] = member
            self._rebalance(group_id)

    def leave(self, group_id: str, member: _Member) -> None:
        with self._log.cond:
            members = self._groups.get(group_id, {})
            members.pop(member.member_id, None)
            if members:
                self._rebalance(group_id)
            else:
                self._groups.pop(group_id, None)
            self._log.cond.notify_all()

    def owners(self, group_id: str) -> dict[int, str]:
        with self._log.cond:
            members = self._groups.get(group_id, {})
            return {p: m.client_id for m in members.values() for p in m.owned}

    def free(self, group_id: str, member: _Member) -> set[int]:
        """Partitions `member` should take that no other member still owns (lock held)."""
        members = self._groups.get(group_id, {})
        if member.member_id not in members:
            return set()
        others = set().union(*(m.owned for m in members.values() if m is not member))
        return member.target - member.owned - others

    def _rebalance(self, group_id: str) -> None:
        """Sticky and deterministic: members keep what they had up to a fair share (lock held)."""
        members = self._groups[group_id]
        count = len(self._log.partitions)
        base, extra = divmod(count, len(members))
        # Members holding the most keep the larger shares, so the fewest partitions move.
        order = sorted(members.values(), key=lambda m: (-len(m.target), m.member_id))
        quotas = {m.member_id: base + (1 if i < extra else 0) for i, m in enumerate(order)}
        taken: set[int] = set()
        targets: dict[str, set[int]] = {}
        for m in order:
            keep = sorted(p for p in m.target if p < count)[: quotas[m.member_id]]
            targets[m.member_id] = set(keep)
            taken.update(keep)
        free = iter(p for p in range(count) if p not in taken)
        for m in sorted(members.values(), key=lambda m: m.member_id):
            target = targets[m.member_id]
            target.update(itertools.islice(free, quotas[m.member_id] - len(target)))
            m.target = target
        self._log.cond.notify_all()


class EmbeddedConsumer(LogConsumer):
    """One member of a group of the embedded log; polled by one thread."""

    def __init__(self, log: EmbeddedTaskLog, group_id: str, client_id: str) -> None:
        self._log = log
        self._group_id = group_id
        self._member = _Member(f"{client_id}-{uuid.uuid4().hex}", client_id)
        self._listener: RebalanceListener | None = None
        self._positions: dict[int, int | None] = {}
        """Next offset per owned partition; None until resolved from the committed offset."""
        self._paused: set[int] = set()
        self._turn = 0
        self._closed = False

    def subscribe(self, listener: RebalanceListener) -> None:
        if self._listener is not None:
            raise RuntimeError(f"consumer {self._member.client_id!r} already subscribed")
        self._listener = listener
        self._log.groups.join(self._group_id, self._member)

    def poll(self, max_records: int, timeout: float) -> list[LogRecord]:
        if self._closed:
            raise RuntimeError(f"consumer {self._member.client_id!r} is closed")
        deadline = time.monotonic() + timeout
        cond = self._log.cond
        while True:
            self._sync_assignment()
            records = self._fetch(max_records)
            if records:
                return records
            with cond:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                if not self._has_news():
                    cond.wait(remaining)

    def _sync_assignment(self) -> None:
        """Run the hand-over steps this member owes: revoke first, then take free partitions."""
        member, listener, cond = self._member, self._listener, self._log.cond
        if listener is None:
            return
        with cond:
            revoked = sorted(member.owned - member.target)
        if revoked:
            listener.on_revoked(revoked)
            with cond:
                member.owned.difference_update(revoked)
                for p in revoked:
                    self._positions.pop(p, None)
                    self._paused.discard(p)
                cond.notify_all()
        with cond:
            assigned = sorted(self._log.groups.free(self._group_id, member))
            member.owned.update(assigned)
            for p in assigned:
                self._positions[p] = None
                self._paused.discard(p)
        if assigned:
            listener.on_assigned(assigned)

    def _has_news(self) -> bool:
        """Whether `poll` has anything to do right now (log condition held)."""
        member = self._member
        if self._listener is not None and (
            member.owned - member.target or self._log.groups.free(self._group_id, member)
        ):
            return True
        partitions = self._log.partitions
        return any(
            position is None or position < partitions[p].end
            for p, position in self._positions.items()
            if p not in self._paused
        )

    def _fetch(self, max_records: int) -> list[LogRecord]:
        readable = sorted(p for p in self._positions if p not in self._paused)
        if not readable:
            return []
        self._turn += 1
        start = self._turn % len(readable)
        records: list[LogRecord] = []
        for p in readable[start:] + readable[:start]:
            if len(records) >= max_records:
                break
            position = self._positions[p]
            if position is None:
                position = self._resolve_position(p)
            batch = self._log.read(p, position, max_records - len(records))
            if batch:
                records.extend(batch)
                self._positions[p] = batch[-1].offset + 1
            else:
                with self._log.cond:
                    self._positions[p] = max(position, self._log.partitions[p].start)
        return records

    def _resolve_position(self, partition: int) -> int:
        committed = self._log.committed(self._group_id, [partition])[partition]
        with self._log.cond:
            start = self._log.partitions[partition].start
        position = start if committed is None else max(committed, start)
        self._positions[partition] = position
        return position

    def commit(self, offsets: Mapping[int, int]) -> None:
        if offsets:
            self._log.commit(self._group_id, offsets)

    def committed(self, partitions: Collection[int]) -> dict[int, int | None]:
        return self._log.committed(self._group_id, partitions)

    def seek(self, partition: int, offset: int) -> None:
        if partition not in self._positions:
            raise ValueError(
                f"cannot seek partition {partition}: consumer {self._member.client_id!r} "
                f"does not own it (owns {sorted(self._positions)})"
            )
        self._positions[partition] = offset

    def pause(self, partitions: Collection[int]) -> None:
        self._paused.update(partitions)

    def resume(self, partitions: Collection[int]) -> None:
        self._paused.difference_update(partitions)

    def assignment(self) -> set[int]:
        with self._log.cond:
            return set(self._member.owned)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._listener is None:
            return
        with self._log.cond:
            owned = sorted(self._member.owned)
        if owned:
            self._listener.on_revoked(owned)
        self._log.groups.leave(self._group_id, self._member)
        with self._log.cond:
            self._member.owned.clear()
        self._positions.clear()
