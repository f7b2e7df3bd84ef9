"""The batch store on SQLite, for the embedded mode: three tables in the task store's file."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from scheduler.batch.codec import encode_state
from scheduler.batch.state import JobState
from scheduler.batch.store import (
    DEFAULT_NAME,
    Attempt,
    Changes,
    StoredConfiguration,
    dumps,
    read_state,
)
from scheduler.stores._sqlite_file import SqliteFile
from scheduler.stores._workflows import BatchStoreAdapter, read_configuration

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batch_configurations (name TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batch_states (
    name TEXT NOT NULL, job TEXT NOT NULL, state TEXT NOT NULL, PRIMARY KEY (name, job));
CREATE TABLE IF NOT EXISTS batch_attempts (
    name TEXT NOT NULL, job TEXT NOT NULL, partition_ms INTEGER NOT NULL,
    attempt INTEGER NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (name, job, partition_ms, attempt));
"""
_PUT_ATTEMPT = "INSERT OR REPLACE INTO batch_attempts VALUES (?, ?, ?, ?, ?)"
_PUT_STATE = "INSERT OR REPLACE INTO batch_states VALUES (?, ?, ?)"
_DROP_STATE = "DELETE FROM batch_states WHERE name = ? AND job = ?"
_PUT_CONFIGURATION = "INSERT OR REPLACE INTO batch_configurations VALUES (?, ?)"


class SqliteBatchStore(SqliteFile, BatchStoreAdapter):
    """Batch configurations, states and attempts in a SQLite file (the task store's by
    default)."""

    what = "batch store"
    schema = _SCHEMA

    def configuration(self, name: str = DEFAULT_NAME) -> StoredConfiguration | None:
        rows = self._read("SELECT record FROM batch_configurations WHERE name = ?", (name,))
        return read_configuration(rows[0][0]) if rows else None

    def states(self, name: str = DEFAULT_NAME) -> dict[str, JobState]:
        rows = self._read("SELECT job, state FROM batch_states WHERE name = ?", (name,))
        return {job: read_state(state) for job, state in rows}

    def write(self, changes: Changes, name: str = DEFAULT_NAME) -> None:
        # One transaction: one commit (one fsync) per task of the batch queue.
        writes: list[tuple[str, tuple[Any, ...]]] = [
            (_PUT_ATTEMPT, (name, a.job, a.partition, a.attempt, dumps(a.to_json())))
            for a in changes.attempts
        ]
        writes += [
            (_PUT_STATE, (name, job, dumps(encode_state(state))))
            for job, state in changes.states.items()
        ]
        writes += [(_DROP_STATE, (name, job)) for job in changes.removed]
        if changes.configuration is not None:
            writes.append((_PUT_CONFIGURATION, (name, dumps(changes.configuration.to_json()))))
        if writes:
            self._write(writes)

    def last_attempts(
        self, wanted: Mapping[str, Collection[int]], name: str = DEFAULT_NAME
    ) -> dict[tuple[str, int], int]:
        found: dict[tuple[str, int], int] = {}
        for job, partitions in wanted.items():
            listed = sorted(set(partitions))
            if not listed:
                continue
            rows = self._read(
                "SELECT partition_ms, MAX(attempt) FROM batch_attempts WHERE name = ? AND "
                f"job = ? AND partition_ms IN ({', '.join('?' * len(listed))}) "
                "GROUP BY partition_ms",
                (name, job, *listed),
            )
            found.update(((job, int(p)), int(a)) for p, a in rows)
        return found

    def attempts(
        self,
        job: str,
        name: str = DEFAULT_NAME,
        *,
        partition: int | None = None,
        first_ms: int | None = None,
        stop_ms: int | None = None,
        limit: int = 1000,
    ) -> list[Attempt]:
        given = {
            "partition_ms = ?": partition,
            "partition_ms >= ?": first_ms,
            "partition_ms < ?": stop_ms,
        }
        where = ["name = ?", "job = ?", *(term for term, v in given.items() if v is not None)]
        params = [name, job, *(v for v in given.values() if v is not None)]
        rows = self._read(
            f"SELECT record FROM batch_attempts WHERE {' AND '.join(where)} "
            "ORDER BY partition_ms DESC, attempt DESC LIMIT ?",
            (*params, limit),
        )
        return [Attempt.from_json(json.loads(row[0])) for row in rows]

    def delete_attempts_before(self, job: str, cutoff_ms: int, name: str = DEFAULT_NAME) -> None:
        forget = "DELETE FROM batch_attempts WHERE name = ? AND job = ? AND partition_ms < ?"
        self._write([(forget, (name, job, cutoff_ms))])

    def delete_job(self, job: str, name: str = DEFAULT_NAME) -> None:
        self._write(
            [
                ("DELETE FROM batch_attempts WHERE name = ? AND job = ?", (name, job)),
                (_DROP_STATE, (name, job)),
            ]
        )
