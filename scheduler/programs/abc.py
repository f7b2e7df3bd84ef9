"""The run store port: durable run records with a retention, on SQLite and on Cassandra.

Contract (the suite in tests/contracts/test_run_store_contract.py holds every adapter to it):

* A run is keyed by its run id. `create` writes a run only if no run of that id exists, and
  returns the run that is stored either way (a launch re-executed after a crash gets the run it
  made before, never a second one).
* `transition` changes a run's record only if its status is one of `expected`, and says whether
  it did: the run task and an operator's kill may race on a PENDING run and exactly one wins.
  Writes of one run otherwise come from the one task that starts it (its `run:<run_id>` task,
  or the `run-many` task of its launch batch), one at a time. `transition_many` is
  `transition` for several runs in one store write, each run conditional on its own status.
* `active` lists a program's PENDING and RUNNING runs. The launch decides concurrency limits on
  it inside the program's queue (`program:<name>`), the only place a run is created, so a count
  can only fall between the look and the create, never rise.
* `list` lists runs newest first (by creation time, then run id), of one program or of all,
  optionally of some statuses, a page at a time: `after` (the `RunCursor` of the last run of the
  page before, `run_cursor`) continues behind that run, so pages neither repeat nor skip a run
  while runs are created. Listing all programs' runs is an admin read: on Cassandra it reads the
  table (at most `_SCAN_LIMIT` rows) and sorts in memory.
* Records expire `retention_s` after their last write (Cassandra TTL; SQLite: deleted on write
  once expired and hidden from reads).

Methods may raise `BackendUnavailableError` after the adapter's own retries are exhausted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence

from scheduler.programs.model import Run, RunStatus

RunCursor = tuple[int, str]
"""Where a page of runs ends: the last run's (created_ms, run_id)."""


def run_cursor(run: Run) -> RunCursor:
    """The cursor that continues a listing behind `run`."""
    return (run.created_ms, run.run_id)


def comes_after(run: Run, cursor: RunCursor) -> bool:
    """Whether `run` lists after `cursor` in the newest-first order (created_ms descending,
    then run_id ascending)."""
    return run.created_ms < cursor[0] or (run.created_ms == cursor[0] and run.run_id > cursor[1])


class RunStore(ABC):
    """The runs of every program of one deployment."""

    retention_s: float
    """How long a run record is kept after its last write."""

    @abstractmethod
    def open(self, *, create_schema: bool = True) -> None:
        """Connect, and create the tables idempotently if `create_schema`."""

    @abstractmethod
    def close(self) -> None:
        """Release connections (not those of a task store this store borrowed them from)."""

    @abstractmethod
    def create(self, run: Run) -> Run:
        """Store `run` unless a run of its id exists; return the stored run (durable)."""

    def create_many(self, runs: Sequence[Run]) -> list[Run]:
        """`create` for each run, in order; adapters batch it."""
        return [self.create(run) for run in runs]

    @abstractmethod
    def get(self, run_id: str) -> Run | None:
        """The run of this id, or None if there is none (never made, or expired)."""

    def get_many(self, run_ids: Sequence[str]) -> dict[str, Run]:
        """The runs of these ids that exist, by id; adapters read them in one go."""
        found = {run_id: self.get(run_id) for run_id in run_ids}
        return {run_id: run for run_id, run in found.items() if run is not None}

    @abstractmethod
    def transition(self, run: Run, expected: Collection[RunStatus]) -> bool:
        """Replace the stored record of `run.run_id` with `run` if its stored status is one of
        `expected`; True if it did, False if the status was another or the run is missing."""

    def transition_many(self, runs: Sequence[Run], expected: Collection[RunStatus]) -> list[bool]:
        """`transition` for each run (distinct ids), in order: whether each was written.
        Adapters write them in one go; each run is still conditional on its own status."""
        return [self.transition(run, expected) for run in runs]

    @abstractmethod
    def active(self, program: str) -> list[Run]:
        """The program's PENDING and RUNNING runs, oldest first."""

    @abstractmethod
    def list_runs(
        self,
        *,
        program: str | None = None,
        statuses: Collection[RunStatus] | None = None,
        limit: int = 100,
        after: RunCursor | None = None,
    ) -> list[Run]:
        """Runs newest first, of `program` (or all), of `statuses` (or any), at most `limit`;
        with `after`, only those listed after that cursor (the next page)."""
