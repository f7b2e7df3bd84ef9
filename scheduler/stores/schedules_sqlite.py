"""The schedule store on SQLite, for the embedded mode: three tables in the task store's file."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from scheduler.schedules.abc import (
    FireRow,
    ScheduleRecord,
    event_keys,
    stored_json,
    with_fire_state,
)
from scheduler.schedules.job import Job, job_order, key_order
from scheduler.stores._sqlite_file import SqliteFile, in_chunks
from scheduler.stores._workflows import Listed, ScheduleStoreAdapter, dump, read_schedule

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    name TEXT PRIMARY KEY, trigger_type TEXT NOT NULL, status TEXT NOT NULL,
    record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS schedules_by_kind ON schedules (trigger_type, status, name);
CREATE INDEX IF NOT EXISTS schedules_by_status ON schedules (status, name);
CREATE TABLE IF NOT EXISTS schedule_keys (
    event_key TEXT NOT NULL, name TEXT NOT NULL, PRIMARY KEY (event_key, name));
CREATE INDEX IF NOT EXISTS schedule_keys_by_name ON schedule_keys (name);
CREATE TABLE IF NOT EXISTS schedule_jobs (
    name TEXT NOT NULL, job_key TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (name, job_key));
CREATE TABLE IF NOT EXISTS schedule_fires (
    fire_ms INTEGER NOT NULL, shard INTEGER NOT NULL, name TEXT NOT NULL, cron INTEGER NOT NULL,
    revision INTEGER NOT NULL, PRIMARY KEY (fire_ms, shard, name, cron));
"""


class SqliteScheduleStore(SqliteFile, ScheduleStoreAdapter):
    """Schedules in a SQLite file (by default the task store's `store.db`)."""

    what = "schedule store"
    schema = _SCHEMA

    def get(self, name: str) -> ScheduleRecord | None:
        rows = self._read("SELECT record FROM schedules WHERE name = ?", (name,))
        return read_schedule(rows[0][0]) if rows else None

    def put(self, record: ScheduleRecord) -> None:
        previous = self.get(record.name)
        stale = event_keys(previous.schedule) - event_keys(record.schedule) if previous else set()
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO schedules VALUES (?, ?, ?, ?)",
                (record.name, record.trigger_type, record.status, dump(stored_json(record))),
            )
            for key in stale:
                db.execute(
                    "DELETE FROM schedule_keys WHERE event_key = ? AND name = ?", (key, record.name)
                )
            for key in event_keys(record.schedule):
                db.execute("INSERT OR IGNORE INTO schedule_keys VALUES (?, ?)", (key, record.name))

    def delete(self, name: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM schedules WHERE name = ?", (name,))
            db.execute("DELETE FROM schedule_keys WHERE name = ?", (name,))
            db.execute("DELETE FROM schedule_jobs WHERE name = ?", (name,))

    def _page(
        self,
        decode: Callable[[str], Listed],
        trigger_type: str | None,
        status: str | None,
        after: str,
        limit: int,
    ) -> list[Listed]:
        given = {"trigger_type = ?": trigger_type, "status = ?": status}
        where = ["name > ?", *(term for term, value in given.items() if value is not None)]
        params = [after, *(value for value in given.values() if value is not None)]
        rows = self._read(
            f"SELECT record FROM schedules WHERE {' AND '.join(where)} ORDER BY name LIMIT ?",
            (*params, limit),
        )
        return [decode(row[0]) for row in rows]

    def names_for_key(self, key: str) -> list[str]:
        rows = self._read(
            "SELECT name FROM schedule_keys WHERE event_key = ? ORDER BY name", (key,)
        )
        return [row[0] for row in rows]

    def add_key(self, key: str, name: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO schedule_keys VALUES (?, ?)", (key, name))

    def remove_key(self, key: str, name: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM schedule_keys WHERE event_key = ? AND name = ?", (key, name))

    def jobs_of(self, names: Sequence[str]) -> dict[str, list[Job]]:
        found: dict[str, list[Job]] = {name: [] for name in names}
        for name, text in _records_of(self._read, "schedule_jobs", list(found)):
            found[name].append(Job.model_validate_json(text))
        for jobs in found.values():
            jobs.sort(key=job_order)
        return found

    def put_jobs(
        self,
        jobs: Sequence[Job],
        *,
        delete: Sequence[tuple[str, str]] = (),
        below: Sequence[tuple[str, str]] = (),
    ) -> None:
        # Encoded before the lock: the file's one connection is shared by every tick's thread.
        rows = [(j.schedule.name, j.key, j.model_dump_json(by_alias=True)) for j in jobs]
        with self._transaction() as db:
            db.executemany("INSERT OR REPLACE INTO schedule_jobs VALUES (?, ?, ?)", rows)
            gone = list(delete)
            for name, floor in below:  # the keys sort as text, not as numbers: compare here
                keys = db.execute("SELECT job_key FROM schedule_jobs WHERE name = ?", (name,))
                gone += [(name, k) for (k,) in keys if key_order(k) < key_order(floor)]
            db.executemany("DELETE FROM schedule_jobs WHERE name = ? AND job_key = ?", gone)

    def put_fires(self, rows: list[FireRow]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO schedule_fires VALUES (?, ?, ?, ?, ?)",
                [(r.fire_ms, r.shard, r.name, r.cron, r.revision) for r in rows],
            )

    def fires(self, fire_ms: int, shard: int) -> list[FireRow]:
        rows = self._read(
            "SELECT fire_ms, shard, name, cron, revision FROM schedule_fires "
            "WHERE fire_ms = ? AND shard = ? ORDER BY name, cron",
            (fire_ms, shard),
        )
        return [FireRow(*row) for row in rows]

    def delete_fires(self, fire_ms: int, shard: int) -> None:
        with self._transaction() as db:
            db.execute(
                "DELETE FROM schedule_fires WHERE fire_ms = ? AND shard = ?", (fire_ms, shard)
            )

    def get_versioned(self, names: list[str]) -> dict[str, tuple[ScheduleRecord, str]]:
        found: dict[str, tuple[ScheduleRecord, str]] = {}
        for name, text in _records_of(self._read, "schedules", names):
            found[name] = (read_schedule(text), text)
        return found

    def replace_many(self, changes: list[tuple[str, ScheduleRecord]]) -> set[str]:
        # The compare-and-set of every record in one transaction: the stored texts read in a
        # few `IN` reads, compared here, and the unchanged ones rewritten in one executemany
        # (BEGIN IMMEDIATE holds the write lock from the read to the write).
        # The new texts are made before the lock (the connection is shared by every tick).
        texts = {record.name: (text, record) for text, record in changes}
        names = list(texts)
        new = {name: dump(with_fire_state(text, record)) for name, (text, record) in texts.items()}
        with self._transaction() as db:
            stored = dict(
                _records_of(lambda sql, args: db.execute(sql, args).fetchall(), "schedules", names)
            )
            written = {name for name, (text, _) in texts.items() if stored.get(name) == text}
            db.executemany(
                "UPDATE schedules SET record = ? WHERE name = ?",
                [(new[name], name) for name in names if name in written],
            )
        return written


def _records_of(
    read: Callable[[str, tuple[str, ...]], Iterable[Any]], table: str, names: Sequence[str]
) -> Iterator[tuple[str, str]]:
    """The (name, record) rows of `table` for `names`, read `IN_LIMIT` names at a time."""
    for chunk, marks in in_chunks(names):
        yield from read(f"SELECT name, record FROM {table} WHERE name IN ({marks})", chunk)
