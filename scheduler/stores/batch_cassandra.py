"""The batch store on Cassandra, sharing the task store's connection and keyspace (its tables:
docs/cassandra.md, Tables).

One writer per name (the `batch:<name>` queue) makes every write a plain upsert. A task of the
queue reads the configuration and the states in one concurrent round, the attempts of the
partitions it starts in one query per job, and writes its attempts, then its changed states,
then the configuration if it changed: a round each.
"""

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
from scheduler.stores import _cassandra_session as driver
from scheduler.stores._workflows import BatchStoreAdapter, read_configuration
from scheduler.stores.cassandra import KeyspaceTenant

_FAR = 2**62


class CassandraBatchStore(KeyspaceTenant, BatchStoreAdapter):
    """Batch jobs in the keyspace of `tasks`, over its connection (open `tasks` first)."""

    what = "batch store"

    def ddl(self, ks: str) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {ks}.batch_configurations (name text PRIMARY KEY, "
            "record text)",
            f"CREATE TABLE IF NOT EXISTS {ks}.batch_states (name text, job text, state text, "
            "PRIMARY KEY ((name), job))",
            f"CREATE TABLE IF NOT EXISTS {ks}.batch_attempts (name text, job text, "
            "partition_ms bigint, attempt int, record text, "
            "PRIMARY KEY ((name, job), partition_ms, attempt)) "
            "WITH CLUSTERING ORDER BY (partition_ms DESC, attempt DESC)",
        ]

    def statements(self, ks: str) -> dict[str, str]:
        attempts = f"SELECT record FROM {ks}.batch_attempts WHERE name = ? AND job = ?"
        return {
            "get_config": f"SELECT record FROM {ks}.batch_configurations WHERE name = ?",
            "put_config": f"INSERT INTO {ks}.batch_configurations (name, record) VALUES (?, ?)",
            "states": f"SELECT job, state FROM {ks}.batch_states WHERE name = ?",
            "put_state": f"INSERT INTO {ks}.batch_states (name, job, state) VALUES (?, ?, ?)",
            "drop_state": f"DELETE FROM {ks}.batch_states WHERE name = ? AND job = ?",
            "put_attempt": f"INSERT INTO {ks}.batch_attempts (name, job, partition_ms, attempt, "
            "record) VALUES (?, ?, ?, ?, ?)",
            "attempts": attempts + " LIMIT ?",
            "attempts_of": attempts + " AND partition_ms = ? LIMIT ?",
            "last_attempts": f"SELECT partition_ms, attempt FROM {ks}.batch_attempts "
            "WHERE name = ? AND job = ? AND partition_ms IN ?",
            "attempts_between": attempts + " AND partition_ms >= ? AND partition_ms < ? LIMIT ?",
            "forget_before": f"DELETE FROM {ks}.batch_attempts WHERE name = ? AND job = ? "
            "AND partition_ms < ?",
            "forget_job": f"DELETE FROM {ks}.batch_attempts WHERE name = ? AND job = ?",
        }

    def configuration(self, name: str = DEFAULT_NAME) -> StoredConfiguration | None:
        rows = self._one("get_config", (name,), f"read batch configuration {name}")
        return read_configuration(rows[0][0]) if rows and rows[0][0] is not None else None

    def states(self, name: str = DEFAULT_NAME) -> dict[str, JobState]:
        rows = self._one("states", (name,), f"read batch states of {name}")
        return {job: read_state(state) for job, state in rows}

    def read(
        self, name: str = DEFAULT_NAME
    ) -> tuple[StoredConfiguration | None, dict[str, JobState]]:
        config, states = self._many(
            [("get_config", (name,)), ("states", (name,))],
            f"read batch configuration and states of {name}",
        )
        record = read_configuration(config[0][0]) if config and config[0][0] is not None else None
        return record, {job: read_state(state) for job, state in states}

    def write(self, changes: Changes, name: str = DEFAULT_NAME) -> None:
        # In the port's order, a round each: a task that failed half-way and runs again finds
        # the states as they were whenever its attempts are not all written (it writes them
        # again), and the configuration last.
        q, run = self._q, self._runner()
        attempts = [(q["put_attempt"], _attempt_row(a, name)) for a in changes.attempts]
        states: list[tuple[Any, tuple[Any, ...]]] = [
            (q["put_state"], (name, job, dumps(encode_state(state))))
            for job, state in changes.states.items()
        ]
        states += [(q["drop_state"], (name, job)) for job in changes.removed]
        for what, items in (
            ("attempts", driver.statement_batches(attempts)),
            ("states", driver.statement_batches(states, key_columns=1)),
        ):
            run.many(items, f"write the batch {what} of {name}")  # nothing sent for no items
        if changes.configuration is not None:
            record = dumps(changes.configuration.to_json())
            self._one("put_config", (name, record), f"write batch configuration {name}")

    def last_attempts(
        self, wanted: Mapping[str, Collection[int]], name: str = DEFAULT_NAME
    ) -> dict[tuple[str, int], int]:
        jobs = [(job, sorted(set(partitions))) for job, partitions in wanted.items() if partitions]
        rows = self._many(
            [("last_attempts", (name, job, partitions)) for job, partitions in jobs],
            f"read the last attempts of batch {name}",
        )
        found: dict[tuple[str, int], int] = {}
        for (job, _), listed in zip(jobs, rows, strict=True):
            for partition, attempt in listed:
                key = (job, int(partition))
                found[key] = max(found.get(key, 0), int(attempt))
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
        what = f"read attempts of {job}"
        if partition is not None:
            rows = self._one("attempts_of", (name, job, partition, limit), what)
            rows = [r for r in rows if _within(r, first_ms, stop_ms)]
        elif first_ms is not None or stop_ms is not None:
            low = -_FAR if first_ms is None else first_ms
            high = _FAR if stop_ms is None else stop_ms
            rows = self._one("attempts_between", (name, job, low, high, limit), what)
        else:
            rows = self._one("attempts", (name, job, limit), what)
        return [Attempt.from_json(json.loads(row[0])) for row in rows]

    def delete_attempts_before(self, job: str, cutoff_ms: int, name: str = DEFAULT_NAME) -> None:
        self._one("forget_before", (name, job, cutoff_ms), f"delete old attempts of {job}")

    def delete_job(self, job: str, name: str = DEFAULT_NAME) -> None:
        self._one("forget_job", (name, job), f"delete attempts of {job}")
        self._one("drop_state", (name, job), f"delete batch state {job}")


def _within(row: tuple[Any, ...], first_ms: int | None, stop_ms: int | None) -> bool:
    partition = int(json.loads(row[0])["partition"])
    return (first_ms is None or partition >= first_ms) and (stop_ms is None or partition < stop_ms)


def _attempt_row(attempt: Attempt, name: str) -> tuple[Any, ...]:
    return (name, attempt.job, attempt.partition, attempt.attempt, dumps(attempt.to_json()))
