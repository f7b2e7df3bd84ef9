"""The run store on Cassandra, sharing the task store's connection and keyspace.

A run is created with a lightweight transaction (`IF NOT EXISTS`: a launch re-executed on another
worker gets the run the first made) and changed with conditional updates (`IF status IN ...`: a kill
and the start of a PENDING run cannot both win). `create_many` and `transition_many` send theirs
concurrently, each conditional on its own run. `runs_by_program` pages with clustering bounds,
never by skipping rows. A crash between the `runs` write and the index writes leaves them stale
until the run's next write; `active` checks each listed run's record, so a stale entry is never
counted. Every write carries the retention as its TTL; listing every program's runs reads `runs`
(an admin read, bounded by `_SCAN_LIMIT`) and sorts it here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from scheduler.programs.abc import RunCursor, RunStore, comes_after
from scheduler.programs.model import ACTIVE, Run, RunStatus
from scheduler.stores._workflows import dump_run, read_run
from scheduler.stores.cassandra import CassandraTaskStore, KeyspaceTenant, ttl_of

_SCAN_LIMIT = 10_000


class CassandraRunStore(KeyspaceTenant, RunStore):
    """Runs in the keyspace of `tasks`, over its connection (open `tasks` first)."""

    what = "run store"
    forget_deletes = ("active_runs",)
    """Every run's end deletes its `active_runs` row, and `active` reads the program's whole
    partition: with Cassandra's default ten days of tombstones, a program ending 10,000 runs a
    day would make it fail. `active` checks each row against the run's record (and deletes a
    stale one again), so a row coming back is harmless."""

    def __init__(self, *, tasks: CassandraTaskStore, retention_s: float = 7 * 86400) -> None:
        super().__init__(tasks=tasks)
        self.retention_s = retention_s
        self.ttl_s = ttl_of(retention_s)

    def ddl(self, ks: str) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {ks}.runs (run_id text PRIMARY KEY, program text, "
            "status text, created_ms bigint, record text)",
            f"CREATE TABLE IF NOT EXISTS {ks}.runs_by_program (program text, created_ms bigint, "
            "run_id text, status text, record text, PRIMARY KEY ((program), created_ms, run_id)) "
            "WITH CLUSTERING ORDER BY (created_ms DESC, run_id ASC)",
            f"CREATE TABLE IF NOT EXISTS {ks}.active_runs (program text, run_id text, "
            "created_ms bigint, PRIMARY KEY ((program), run_id))",
        ]

    def statements(self, ks: str) -> dict[str, str]:
        return {
            "create": f"INSERT INTO {ks}.runs (run_id, program, status, created_ms, record) "
            "VALUES (?, ?, ?, ?, ?) IF NOT EXISTS USING TTL ?",
            "get": f"SELECT record FROM {ks}.runs WHERE run_id = ?",
            "transition": f"UPDATE {ks}.runs USING TTL ? SET program = ?, status = ?, "
            "created_ms = ?, record = ? WHERE run_id = ? IF status IN ?",
            "index": f"INSERT INTO {ks}.runs_by_program (program, created_ms, run_id, status, "
            "record) VALUES (?, ?, ?, ?, ?) USING TTL ?",
            "activate": f"INSERT INTO {ks}.active_runs (program, run_id, created_ms) "
            "VALUES (?, ?, ?) USING TTL ?",
            "deactivate": f"DELETE FROM {ks}.active_runs WHERE program = ? AND run_id = ?",
            "active": f"SELECT run_id FROM {ks}.active_runs WHERE program = ?",
            "by_program": f"SELECT record FROM {ks}.runs_by_program WHERE program = ? LIMIT ?",
            "by_program_at": f"SELECT record FROM {ks}.runs_by_program WHERE program = ? "
            "AND created_ms = ? AND run_id > ? LIMIT ?",
            "by_program_before": f"SELECT record FROM {ks}.runs_by_program WHERE program = ? "
            "AND created_ms < ? LIMIT ?",
            "scan": f"SELECT record FROM {ks}.runs LIMIT {_SCAN_LIMIT}",
        }

    def create(self, run: Run) -> Run:
        return self.create_many([run])[0]

    def create_many(self, runs: Sequence[Run]) -> list[Run]:
        """`create` for each run, the conditional inserts sent concurrently (an id given twice is
        sent once, as first given); a run made before (a re-executed launch, or a retried insert
        that had applied) is read back."""
        first: dict[str, Run] = {}
        for run in runs:
            first.setdefault(run.run_id, run)
        unique = list(first.values())
        texts = [dump_run(run) for run in unique]
        items = [
            ("create", (r.run_id, r.program, str(r.status), r.created_ms, text, self.ttl_s))
            for r, text in zip(unique, texts, strict=True)
        ]
        answers = self._many(items, f"create {_runs(unique)}")
        made = [bool(rows and rows[0][0]) for rows in answers]
        found = self.get_many([run.run_id for run, ok in zip(unique, made, strict=True) if not ok])
        stored: dict[str, tuple[Run, str]] = {}
        for run, text, ok in zip(unique, texts, made, strict=True):
            kept = None if ok else found.get(run.run_id)
            stored[run.run_id] = (run, text) if kept is None else (kept, dump_run(kept))
        self._index_many(list(stored.values()))
        return [stored[run.run_id][0] for run in runs]

    def get(self, run_id: str) -> Run | None:
        rows = self._one("get", (run_id,), f"read run {run_id}")
        return read_run(rows[0][0]) if rows and rows[0][0] is not None else None

    def get_many(self, run_ids: Sequence[str]) -> dict[str, Run]:
        ids = list(dict.fromkeys(run_ids))
        answers = self._many([("get", (run_id,)) for run_id in ids], f"read {len(ids)} runs")
        return {
            run_id: read_run(rows[0][0])
            for run_id, rows in zip(ids, answers, strict=True)
            if rows and rows[0][0] is not None
        }

    def transition_many(self, runs: Sequence[Run], expected: Collection[RunStatus]) -> list[bool]:
        statuses = [str(s) for s in expected]
        records = [dump_run(run) for run in runs]
        items = [
            (
                "transition",
                (self.ttl_s, r.program, str(r.status), r.created_ms, text, r.run_id, statuses),
            )
            for r, text in zip(runs, records, strict=True)
        ]
        answers = self._many(items, f"update {_runs(runs)}")
        written = [bool(rows and rows[0][0]) for rows in answers]
        unsure = [run.run_id for run, ok in zip(runs, written, strict=True) if not ok]
        if unsure:
            # A retried statement whose first try applied answers "not applied": our record.
            stored = self.get_many(unsure)
            written = [
                ok or (run.run_id in stored and dump_run(stored[run.run_id]) == text)
                for run, ok, text in zip(runs, written, records, strict=True)
            ]
        applied = [(run, text) for run, text, ok in zip(runs, records, written, strict=True) if ok]
        self._index_many(applied)
        return written

    def transition(self, run: Run, expected: Collection[RunStatus]) -> bool:
        return self.transition_many([run], expected)[0]

    def _index_many(self, runs: Sequence[tuple[Run, str]]) -> None:
        """Write each (run, its record) to the program's index and active set."""
        items: list[tuple[str, tuple[object, ...]]] = []
        for run, text in runs:
            row = (run.program, run.created_ms, run.run_id, str(run.status), text, self.ttl_s)
            items.append(("index", row))
            if run.status.is_active:
                items.append(("activate", (run.program, run.run_id, run.created_ms, self.ttl_s)))
            else:
                items.append(("deactivate", (run.program, run.run_id)))
        if items:
            self._many(items, f"index {_runs([run for run, _ in runs])}")

    def active(self, program: str) -> list[Run]:
        ids = [row[0] for row in self._one("active", (program,), f"list active runs of {program}")]
        runs = []
        for run_id in ids:
            run = self.get(run_id)
            if run is not None and run.status.is_active:
                runs.append(run)
            elif run is not None:  # a crash left the index stale: repair it
                self._index_many([(run, dump_run(run))])
        return sorted(runs, key=lambda r: (r.created_ms, r.run_id))

    def list_runs(
        self,
        *,
        program: str | None = None,
        statuses: Collection[RunStatus] | None = None,
        limit: int = 100,
        after: RunCursor | None = None,
    ) -> list[Run]:
        wanted = None if statuses is None else set(statuses)
        if program is not None and wanted is not None and wanted <= ACTIVE:
            runs = sorted(self.active(program), key=_newest_first)  # filtered below
        elif program is not None:
            # The index may hold an older record of a run (a crash between writes): the record
            # in `runs` is the truth, but the index's order is kept.
            runs = self._by_program(program, _SCAN_LIMIT if wanted else limit, after)
        else:
            rows = self._one("scan", (), "list runs")
            runs = sorted((read_run(row[0]) for row in rows), key=_newest_first)
        if after is not None:
            runs = [r for r in runs if comes_after(r, after)]
        if wanted is not None:
            runs = [r for r in runs if r.status in wanted]
        return runs[:limit]

    def _by_program(self, program: str, count: int, after: RunCursor | None) -> list[Run]:
        """Up to `count` runs of `program` from its index, newest first, after `after`."""
        what = f"list runs of {program}"
        if after is None:
            rows = list(self._one("by_program", (program, count), what))
        else:
            rows = list(self._one("by_program_at", (program, after[0], after[1], count), what))
            if len(rows) < count:
                rows += self._one("by_program_before", (program, after[0], count - len(rows)), what)
        return [read_run(row[0]) for row in rows]


def _runs(runs: Sequence[Run]) -> str:
    """Names the runs in an error: "run <id>" for one, "<n> runs" for more."""
    return f"run {runs[0].run_id}" if len(runs) == 1 else f"{len(runs)} runs"


def _newest_first(run: Run) -> tuple[int, str]:
    return (-run.created_ms, run.run_id)
