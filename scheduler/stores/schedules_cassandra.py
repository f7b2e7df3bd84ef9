"""The schedule store on Cassandra, sharing the task store's connection and keyspace (its tables,
designed from the queries: docs/cassandra.md, Tables).

Writes come from the schedule's own queue one at a time and are idempotent (a task re-executed
after a crash writes the same rows again), so no lightweight transactions are needed. Index rows
are written before the record: a crash in between leaves an index row the record does not
explain yet, which the repeated task completes and which readers check against the record.

The listing index keeps the status in a column of its row, not in its partition key: a status
change overwrites a cell instead of moving the row between partitions, so enabling 100,000
schedules leaves no tombstone where the listings read (Cassandra refuses a read that meets
`tombstone_failure_threshold` of them, 100,000 by default, until compaction drops them).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

from scheduler.schedules.abc import (
    TRIGGER_TYPES,
    FireRow,
    ScheduleRecord,
    event_keys,
    stored_json,
    with_fire_state,
)
from scheduler.schedules.job import Job, job_order, key_order
from scheduler.stores import _cassandra_session as driver
from scheduler.stores._workflows import Listed, ScheduleStoreAdapter, dump, read_schedule
from scheduler.stores.cassandra import KeyspaceTenant

log = logging.getLogger(__name__)


class CassandraScheduleStore(KeyspaceTenant, ScheduleStoreAdapter):
    """Schedules in the keyspace of `tasks`, over its connection (open `tasks` first)."""

    what = "schedule store"

    def ddl(self, ks: str) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {ks}.schedules (name text PRIMARY KEY, trigger_type text, "
            "status text, record text)",
            f"CREATE TABLE IF NOT EXISTS {ks}.schedules_by_type (trigger_type text, name text, "
            "status text, PRIMARY KEY ((trigger_type), name))",
            f"CREATE TABLE IF NOT EXISTS {ks}.schedule_keys (event_key text, name text, "
            "PRIMARY KEY ((event_key), name))",
            f"CREATE TABLE IF NOT EXISTS {ks}.schedule_jobs (name text, revision bigint, "
            "generation int, record text, PRIMARY KEY ((name), revision, generation))",
            f"CREATE TABLE IF NOT EXISTS {ks}.schedule_fires (fire_ms bigint, shard int, "
            "name text, cron int, revision bigint, PRIMARY KEY ((fire_ms, shard), name, cron))",
        ]

    def statements(self, ks: str) -> dict[str, str]:
        return {
            "get": f"SELECT record FROM {ks}.schedules WHERE name = ?",
            "get_many": f"SELECT name, record FROM {ks}.schedules WHERE name IN ?",
            "put": f"INSERT INTO {ks}.schedules (name, trigger_type, status, record) "
            "VALUES (?, ?, ?, ?)",
            "delete": f"DELETE FROM {ks}.schedules WHERE name = ?",
            "list_add": f"INSERT INTO {ks}.schedules_by_type (trigger_type, name, status) "
            "VALUES (?, ?, ?)",
            "list_add_at": f"INSERT INTO {ks}.schedules_by_type (trigger_type, name, status) "
            "VALUES (?, ?, ?) USING TIMESTAMP ?",
            "list_remove": f"DELETE FROM {ks}.schedules_by_type WHERE trigger_type = ? "
            "AND name = ?",
            "list_page": f"SELECT name FROM {ks}.schedules_by_type WHERE trigger_type = ? "
            "AND name > ? LIMIT ?",
            # Filtering inside one partition: the node skips the other status's rows itself.
            "list_page_of": f"SELECT name FROM {ks}.schedules_by_type WHERE trigger_type = ? "
            "AND name > ? AND status = ? LIMIT ? ALLOW FILTERING",
            "all_kinds": f"SELECT name, trigger_type, status, WRITETIME(status) "
            f"FROM {ks}.schedules",
            "key_add": f"INSERT INTO {ks}.schedule_keys (event_key, name) VALUES (?, ?)",
            "key_remove": f"DELETE FROM {ks}.schedule_keys WHERE event_key = ? AND name = ?",
            "key_names": f"SELECT name FROM {ks}.schedule_keys WHERE event_key = ?",
            "job_put": f"INSERT INTO {ks}.schedule_jobs (name, revision, generation, record) "
            "VALUES (?, ?, ?, ?)",
            "jobs": f"SELECT record FROM {ks}.schedule_jobs WHERE name = ?",
            "job_delete": f"DELETE FROM {ks}.schedule_jobs WHERE name = ? AND revision = ? "
            "AND generation = ?",
            "jobs_delete": f"DELETE FROM {ks}.schedule_jobs WHERE name = ?",
            "jobs_delete_below": f"DELETE FROM {ks}.schedule_jobs WHERE name = ? "
            "AND (revision, generation) < (?, ?)",
            "fire_put": f"INSERT INTO {ks}.schedule_fires (fire_ms, shard, name, cron, revision) "
            "VALUES (?, ?, ?, ?, ?)",
            "fires": f"SELECT fire_ms, shard, name, cron, revision FROM {ks}.schedule_fires "
            "WHERE fire_ms = ? AND shard = ?",
            "fires_delete": f"DELETE FROM {ks}.schedule_fires WHERE fire_ms = ? AND shard = ?",
            "replace": f"UPDATE {ks}.schedules SET record = ? WHERE name = ? IF record = ?",
        }

    forget_deletes = ("schedules_by_type", "schedule_keys")
    """A listing checks each index row against its record, and a schedule's own task drops an
    event its trigger does not count (a `run-end:` key stops again once no job waits): a deleted
    row coming back is harmless, so none of the deletes of schedules, of waits ending and of
    trigger changes leaves a tombstone that counts."""

    def open(self, *, create_schema: bool = True) -> None:
        super().open(create_schema=create_schema)
        if create_schema:
            self._replace_the_old_index()

    def _replace_the_old_index(self) -> None:
        """In a keyspace made before `schedules_by_type`, index every schedule from its record's
        columns and drop the old `schedules_by_kind` (partitioned by trigger type and status,
        so each status change left a tombstone). Each row is written at its record's write
        time: a schedule written while this runs keeps its newer row. Two processes doing it at
        once write the same rows."""
        run, ks = self._runner(), self.tasks.keyspace
        old = run.one(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s "
            "AND table_name = 'schedules_by_kind'",
            (ks,),
            "look for the old schedule index",
        )
        if not old:
            return
        rows = self._one("all_kinds", (), "read every schedule's trigger type and status")
        log.info("indexing %d schedules by trigger type in %s (once)", len(rows), ks)
        self._many(
            [("list_add_at", (kind, name, status, at)) for name, kind, status, at in rows],
            f"index {len(rows)} schedules by trigger type",
        )
        driver.apply_schema(run, [f"DROP TABLE IF EXISTS {ks}.schedules_by_kind"], timeout=60.0)

    def get(self, name: str) -> ScheduleRecord | None:
        rows = self._one("get", (name,), f"read schedule {name}")
        return read_schedule(rows[0][0]) if rows and rows[0][0] is not None else None

    def put(self, record: ScheduleRecord) -> None:
        name = record.name
        what = f"write schedule {name}"
        previous = self.get(name)
        if previous is not None:
            if previous.trigger_type != record.trigger_type:
                self._one("list_remove", (previous.trigger_type, name), what)
            for key in event_keys(previous.schedule) - event_keys(record.schedule):
                self._one("key_remove", (key, name), what)
        self._one("list_add", (record.trigger_type, name, record.status), what)
        for key in sorted(event_keys(record.schedule)):
            self._one("key_add", (key, name), what)
        row = (name, record.trigger_type, record.status, dump(stored_json(record)))
        self._one("put", row, what)

    def delete(self, name: str) -> None:
        what = f"delete schedule {name}"
        previous = self.get(name)
        if previous is None:
            return
        for key in event_keys(previous.schedule):
            self._one("key_remove", (key, name), what)
        self._one("list_remove", (previous.trigger_type, name), what)
        self._one("jobs_delete", (name,), what)
        self._one("delete", (name,), what)

    def _page(
        self,
        decode: Callable[[str], Listed],
        trigger_type: str | None,
        status: str | None,
        after: str,
        limit: int,
    ) -> list[Listed]:
        kinds = [trigger_type] if trigger_type is not None else list(TRIGGER_TYPES)
        # One index partition per trigger type, each read from `after` with the page's LIMIT,
        # all in one concurrent round (five partitions unfiltered): the merge of their names, in
        # order, is the page's.
        indexes = [
            ("list_page", (k, after, limit))
            if status is None
            else ("list_page_of", (k, after, status, limit))
            for k in kinds
        ]
        pages = [[row[0] for row in rows] for rows in self._many(indexes, "list schedules")]
        names = heapq.merge(*pages)
        found: list[Listed] = []
        while len(found) < limit:
            batch = list(islice(names, limit - len(found)))
            if not batch:
                break
            # The page's records in one request (`name IN ?`), not one per name: a page's time
            # was the driver's Python cost per request, 100 of them (docs/cassandra.md).
            texts = dict(self._one("get_many", (batch,), "list schedules"))
            for name in batch:
                text = texts.get(name)
                if text is None:
                    continue
                record = decode(text)
                # A crash between an index write and the record's leaves a row the record does
                # not explain (yet): the record is the truth.
                wanted = (trigger_type or record.trigger_type, status or record.status)
                if wanted == (record.trigger_type, record.status):
                    found.append(record)
        return found

    def names_for_key(self, key: str) -> list[str]:
        return sorted(row[0] for row in self._one("key_names", (key,), f"read index {key}"))

    def add_key(self, key: str, name: str) -> None:
        self._one("key_add", (key, name), f"index {name} under {key}")

    def remove_key(self, key: str, name: str) -> None:
        self._one("key_remove", (key, name), f"unindex {name} from {key}")

    def jobs_of(self, names: Sequence[str]) -> dict[str, list[Job]]:
        unique = list(dict.fromkeys(names))
        answers = self._many([("jobs", (name,)) for name in unique], f"read jobs of {len(unique)}")
        return {
            name: sorted((Job.model_validate_json(row[0]) for row in rows), key=job_order)
            for name, rows in zip(unique, answers, strict=True)
        }

    def put_jobs(
        self,
        jobs: Sequence[Job],
        *,
        delete: Sequence[tuple[str, str]] = (),
        below: Sequence[tuple[str, str]] = (),
    ) -> None:
        items: list[tuple[str, tuple[Any, ...]]] = [
            (
                "job_put",
                (j.schedule.name, j.revision, j.generation, j.model_dump_json(by_alias=True)),
            )
            for j in jobs
        ]
        items += [("job_delete", (name, *key_order(key))) for name, key in delete]
        # One range tombstone, however many jobs it covers; later ones that cover it merge.
        items += [("jobs_delete_below", (name, *key_order(key))) for name, key in below]
        self._many(items, f"write {len(jobs)} jobs")

    def put_fires(self, rows: list[FireRow]) -> None:
        items = [("fire_put", (r.fire_ms, r.shard, r.name, r.cron, r.revision)) for r in rows]
        self._many(items, f"write {len(rows)} fire index rows")

    def fires(self, fire_ms: int, shard: int) -> list[FireRow]:
        rows = self._one("fires", (fire_ms, shard), f"read the fires of {fire_ms}/{shard}")
        return [FireRow(*row) for row in rows]

    def delete_fires(self, fire_ms: int, shard: int) -> None:
        self._one("fires_delete", (fire_ms, shard), f"delete the fires of {fire_ms}/{shard}")

    def get_versioned(self, names: list[str]) -> dict[str, tuple[ScheduleRecord, str]]:
        answers = self._many([("get", (name,)) for name in names], "read schedules")
        found: dict[str, tuple[ScheduleRecord, str]] = {}
        for name, rows in zip(names, answers, strict=True):
            if rows and rows[0][0] is not None:
                found[name] = (read_schedule(rows[0][0]), rows[0][0])
        return found

    def replace_many(self, changes: list[tuple[str, ScheduleRecord]]) -> set[str]:
        texts = [dump(with_fire_state(old, record)) for old, record in changes]
        items = [
            ("replace", (new, record.name, old))
            for (old, record), new in zip(changes, texts, strict=True)
        ]
        answers = self._many(items, f"advance {len(changes)} schedules' fires")
        written: set[str] = set()
        for (_, record), new, rows in zip(changes, texts, answers, strict=True):
            if rows and rows[0][0]:
                written.add(record.name)
            elif rows and len(rows[0]) > 1 and rows[0][1] == new:
                written.add(record.name)  # a retried write that had applied: ours is stored
        return written
