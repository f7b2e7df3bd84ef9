"""Consumer groups of the embedded log: a sticky assignor and cooperative hand-over.

A rebalance only changes each member's *target*. A partition's old owner revokes it inside its own
`poll`, and only then may the new owner take it, inside *its* `poll`: a partition never has two
owners, and every callback runs on the polling thread. All state is guarded by the log's
condition. Members are also written to the file (`_embedded_members`) for other processes.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.logs._embedded_members import HEARTBEAT_S
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
        """Add `member`; raises `ConfigurationError` if another process consumes the group."""
        self._log.members.claim(group_id, member.member_id, member.client_id)
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
        self._log.members.remove(group_id, [member.member_id])

    def forget_all(self) -> None:
        """Delete the rows of members never closed (the log is closing)."""
        with self._log.cond:
            groups = {group_id: list(members) for group_id, members in self._groups.items()}
        for group_id, member_ids in groups.items():
            self._log.members.remove(group_id, member_ids)

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
        self._next_heartbeat = 0.0
        self._closed = False
        self._joined = False
        """True once the first poll after `subscribe` took this member's share (maybe none)."""

    def subscribe(self, listener: RebalanceListener) -> None:
        if self._listener is not None:
            raise RuntimeError(f"consumer {self._member.client_id!r} already subscribed")
        self._log.groups.join(self._group_id, self._member)
        self._listener = listener
        self._next_heartbeat = time.monotonic() + HEARTBEAT_S

    def poll(self, max_records: int, timeout: float) -> list[LogRecord]:
        if self._closed:
            raise RuntimeError(f"consumer {self._member.client_id!r} is closed")
        deadline = time.monotonic() + timeout
        while True:
            self._keep_alive()
            self._sync_assignment()
            records = self._fetch(max_records)
            if records:
                return records
            if not self._wait_for_news(deadline):
                return []

    def _wait_for_news(self, deadline: float) -> bool:
        """Block until `poll` may have something to do; False at the deadline."""
        log, cond = self._log, self._log.cond
        while True:
            self._keep_alive()
            if log.catch_up():
                return True
            with cond:
                if self._has_news():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                # Our own records wake us through the condition; another process's commits are
                # seen by looking at the file every `file_check_s`.
                interval = log.file_check_s
                cond.wait(remaining if interval is None else min(remaining, interval))

    def _keep_alive(self) -> None:
        """Refresh this member's heartbeat in the file every `HEARTBEAT_S`, busy or idle."""
        if self._listener is not None and time.monotonic() >= self._next_heartbeat:
            self._record_membership()

    def _record_membership(self) -> None:
        with self._log.cond:
            owned = set(self._member.owned)
        self._log.members.record(
            self._group_id, self._member.member_id, self._member.client_id, owned
        )
        self._next_heartbeat = time.monotonic() + HEARTBEAT_S

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
        if revoked or assigned:
            self._record_membership()
        if assigned:
            listener.on_assigned(assigned)
        self._joined = True

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
            if position is None:  # newly owned: at the committed offset, else the log start
                committed = self._log.committed_with_metadata(self._group_id, [p])[p][0]
                with self._log.cond:
                    first = self._log.partitions[p].start
                position = first if committed is None else max(committed, first)
                self._positions[p] = position
            batch = self._log.read(p, position, max_records - len(records))
            if batch:
                records.extend(batch)
                self._positions[p] = batch[-1].offset + 1
            else:
                with self._log.cond:
                    self._positions[p] = max(position, self._log.partitions[p].start)
        return records

    def commit(
        self,
        offsets: Mapping[int, int],
        *,
        wait: bool = True,
        metadata: Mapping[int, str] | None = None,
    ) -> None:
        if offsets:
            self._log.commit(self._group_id, offsets, metadata)

    def committed_with_metadata(
        self, partitions: Collection[int]
    ) -> dict[int, tuple[int | None, str]]:
        return self._log.committed_with_metadata(self._group_id, partitions)

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

    def has_joined(self) -> bool:
        return self._joined

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
