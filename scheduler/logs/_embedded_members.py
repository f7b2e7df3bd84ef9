"""Group members of the embedded log, written down in the file for other processes to see:
`scheduler group status` shows the owners, and a second worker process in the same group is
refused instead of consuming every partition a second time.

A row is live while its heartbeat is younger than `LIVE_S` *and* its process exists: a killed
worker blocks nothing, and a reused pid is caught by the heartbeat age.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Collection
from typing import TYPE_CHECKING

from scheduler._sqlite_open import unavailable
from scheduler.errors import ConfigurationError
from scheduler.logs._embedded_schema import transaction

if TYPE_CHECKING:
    from scheduler.logs.embedded import EmbeddedTaskLog

LIVE_S = 30.0
"""A member whose heartbeat is older than this is gone."""
HEARTBEAT_S = 3.0
"""How often a polling consumer refreshes its heartbeat (assignment changes write at once)."""

_UPSERT = "INSERT OR REPLACE INTO members VALUES (?, ?, ?, ?, ?, ?, ?)"
_SELECT = (
    "SELECT member, client_id, pid, partitions, heartbeat_ms FROM members"
    " WHERE topic = ? AND grp = ?"
)


def process_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this machine (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    try:  # a killed child its parent has not reaped yet still answers kill(pid, 0)
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(pid, 0) is all we know


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _live(pid: int, heartbeat_ms: int, now_ms: int) -> bool:
    return now_ms - heartbeat_ms < LIVE_S * 1000 and process_alive(pid)


class MemberTable:
    """The `members` rows of one topic."""

    def __init__(self, log: EmbeddedTaskLog) -> None:
        self._log = log
        self._pid = os.getpid()

    def claim(self, group_id: str, member_id: str, client_id: str) -> None:
        """Record a new member of this process; refuse if another process consumes the group.

        One transaction, so two workers starting at once cannot both pass the check. Rows of
        dead members are deleted on the way.
        """
        now = _now_ms()
        try:
            with self._log.db_lock, transaction(self._log.db) as db:
                rivals = []
                for member, other_client, pid, _, heartbeat in db.execute(
                    _SELECT, (self._log.topic, group_id)
                ).fetchall():
                    if pid == self._pid:
                        continue
                    if _live(pid, heartbeat, now):
                        rivals.append((pid, other_client))
                    else:
                        db.execute(
                            "DELETE FROM members WHERE topic = ? AND grp = ? AND member = ?",
                            (self._log.topic, group_id, member),
                        )
                if not rivals:
                    db.execute(
                        _UPSERT,
                        (self._log.topic, group_id, member_id, client_id, self._pid, "[]", now),
                    )
        except sqlite3.Error as error:
            raise unavailable(f"embedded log {self._log.path!r}", error) from error
        if rivals:
            pid, other_client = rivals[0]
            raise ConfigurationError(
                f"group {group_id!r} of the embedded log {self._log.path or 'in memory'} is "
                f"already consumed by another worker process (pid {pid}, client {other_client!r}); "
                "the embedded log supports one worker process: stop that one first, or use "
                "Kafka (SCHEDULER_LOG=kafka) for several workers"
            )

    def record(
        self, group_id: str, member_id: str, client_id: str, partitions: Collection[int]
    ) -> None:
        """Write this member's partitions and a fresh heartbeat."""
        owned = json.dumps(sorted(partitions))
        row = (self._log.topic, group_id, member_id, client_id, self._pid, owned, _now_ms())
        try:
            with self._log.db_lock:
                self._log.db.execute(_UPSERT, row)
        except sqlite3.Error as error:
            raise unavailable(f"embedded log {self._log.path!r}", error) from error

    def remove(self, group_id: str, member_ids: Collection[str]) -> None:
        """Delete these members' rows (they left the group), if the file can still be written.

        Best effort: a row left behind stops counting after `LIVE_S`, or when this process ends.
        """
        rows = [(self._log.topic, group_id, member) for member in member_ids]
        try:
            with self._log.db_lock:
                self._log.db.executemany(
                    "DELETE FROM members WHERE topic = ? AND grp = ? AND member = ?", rows
                )
        except sqlite3.Error:
            pass

    def foreign_owners(self, group_id: str) -> dict[int, str]:
        """Partition → client id, for the live members of *other* processes."""
        with self._log.read_lock:
            rows = self._log.reader.execute(_SELECT, (self._log.topic, group_id)).fetchall()
        now = _now_ms()
        owners: dict[int, str] = {}
        for _, client_id, pid, partitions, heartbeat in rows:
            if pid != self._pid and _live(pid, heartbeat, now):
                owners.update(dict.fromkeys(json.loads(partitions), client_id))
        return owners
