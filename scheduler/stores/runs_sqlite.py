"""The run store on SQLite, for the embedded mode: one table in the task store's file.

Expiry is a column (`expires_ms`): reads hide expired runs, and each `create` deletes a few
expired ones, so the table stays bounded without a sweeping thread.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from scheduler.programs.abc import RunCursor, RunStore
from scheduler.programs.model import ACTIVE, Run, RunStatus
from scheduler.stores._sqlite_file import SqliteFile, in_chunks
from scheduler.stores._workflows import dump_run, read_run

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, program TEXT NOT NULL, status TEXT NOT NULL,
    created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS runs_by_program ON runs (program, created_ms DESC);
CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_ms DESC);
"""
_PURGE_PER_CREATE = 100


class SqliteRunStore(SqliteFile, RunStore):
    """Runs in a SQLite file (by default the task store's `store.db`)."""

    what = "run store"
    schema = _SCHEMA

    def __init__(self, *, path: str, retention_s: float = 7 * 86400) -> None:
        super().__init__(path=path)
        self.retention_s = retention_s

    def _expiry(self, now: int) -> int:
        return now + int(self.retention_s * 1000)

    def create(self, run: Run) -> Run:
        return self.create_many([run])[0]

    def create_many(self, runs: Sequence[Run]) -> list[Run]:
        """`create` for each run in one transaction: the runs of these ids that exist read in a
        few `IN` reads, the others inserted in one executemany (BEGIN IMMEDIATE holds the write
        lock from the read to the insert)."""
        now = _now_ms()
        ids = list(dict.fromkeys(run.run_id for run in runs))
        # Encoded before the lock, which every thread of the worker's pool shares.
        texts = [dump_run(run) for run in runs]
        with self._transaction() as db:
            db.execute(
                "DELETE FROM runs WHERE rowid IN "
                "(SELECT rowid FROM runs WHERE expires_ms <= ? LIMIT ?)",
                (now, _PURGE_PER_CREATE),
            )
            found: dict[str, Run] = {}
            for chunk, marks in in_chunks(ids):
                db.execute(
                    f"DELETE FROM runs WHERE run_id IN ({marks}) AND expires_ms <= ?",
                    (*chunk, now),
                )
                rows = db.execute(
                    f"SELECT run_id, record FROM runs WHERE run_id IN ({marks})", chunk
                ).fetchall()
                found.update((run_id, read_run(record)) for run_id, record in rows)
            stored: list[Run] = []
            fresh: list[tuple[Any, ...]] = []
            for run, text in zip(runs, texts, strict=True):
                kept = found.get(run.run_id)
                if kept is None:
                    found[run.run_id] = kept = run
                    columns = (run.run_id, run.program, str(run.status), run.created_ms)
                    fresh.append((*columns, self._expiry(now), text))
                stored.append(kept)
            db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?)", fresh)
        return stored

    def get(self, run_id: str) -> Run | None:
        row = self._read(
            "SELECT record FROM runs WHERE run_id = ? AND expires_ms > ?", (run_id, _now_ms())
        )
        return read_run(row[0][0]) if row else None

    def get_many(self, run_ids: Sequence[str]) -> dict[str, Run]:
        found: dict[str, Run] = {}
        for chunk, marks in in_chunks(list(dict.fromkeys(run_ids))):
            rows = self._read(
                f"SELECT run_id, record FROM runs WHERE run_id IN ({marks}) AND expires_ms > ?",
                (*chunk, _now_ms()),
            )
            found.update((run_id, read_run(record)) for run_id, record in rows)
        return found

    def transition(self, run: Run, expected: Collection[RunStatus]) -> bool:
        return self.transition_many([run], expected)[0]

    def transition_many(self, runs: Sequence[Run], expected: Collection[RunStatus]) -> list[bool]:
        """One transaction: an `UPDATE ... WHERE status IN (...)` per run (its row count says
        whether that run was written), one commit for all."""
        now = _now_ms()
        marks = ",".join("?" * len(expected))
        statuses = [str(s) for s in expected]
        sql = (
            "UPDATE runs SET status = ?, expires_ms = ?, record = ? "
            f"WHERE run_id = ? AND expires_ms > ? AND status IN ({marks})"
        )
        expires = self._expiry(now)
        rows = [  # encoded before the lock, which every thread of the worker's pool shares
            (str(run.status), expires, dump_run(run), run.run_id, now, *statuses) for run in runs
        ]
        with self._transaction() as db:
            return [db.execute(sql, row).rowcount == 1 for row in rows]

    def active(self, program: str) -> list[Run]:
        runs = self.list_runs(program=program, statuses=ACTIVE, limit=1_000_000)
        return sorted(runs, key=lambda r: (r.created_ms, r.run_id))

    def list_runs(
        self,
        *,
        program: str | None = None,
        statuses: Collection[RunStatus] | None = None,
        limit: int = 100,
        after: RunCursor | None = None,
    ) -> list[Run]:
        where: list[str] = ["expires_ms > ?"]
        params: list[Any] = [_now_ms()]
        if program is not None:
            where.append("program = ?")
            params.append(program)
        if statuses is not None:
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            params.extend(str(s) for s in statuses)
        if after is not None:
            where.append("(created_ms < ? OR (created_ms = ? AND run_id > ?))")
            params.extend((after[0], after[0], after[1]))
        sql = (
            f"SELECT record FROM runs WHERE {' AND '.join(where)} "
            "ORDER BY created_ms DESC, run_id LIMIT ?"
        )
        rows = self._read(sql, (*params, limit))
        return [read_run(row[0]) for row in rows]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
