"""`scheduler worker` that dies (exit 9, no clean-up) once, at a chosen step of a run:
`python -m tests.programs.crash_child MODE MARKER`.

MODE `launch`: right after the launch wrote the run PENDING, before its run task is enqueued.
MODE `run`: right after the run was marked RUNNING, before the program started.
MODE `run-many`: right after a `run-many` task marked its batch's runs RUNNING, before their
programs started.
The MARKER file is made as it dies, so a worker started later with it present runs normally.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from scheduler.programs.model import RunStatus
from scheduler.stores.runs_cassandra import CassandraRunStore
from scheduler.stores.runs_sqlite import SqliteRunStore


def main() -> None:
    mode, marker = sys.argv[1], sys.argv[2]

    def die_once() -> None:
        if not os.path.exists(marker):
            with open(marker, "w") as made:
                made.write(mode)
            os._exit(9)

    for store in (CassandraRunStore, SqliteRunStore):
        if mode == "launch":
            create = store.create

            def crashing_create(self: Any, run: Any, create: Any = create) -> Any:
                stored = create(self, run)
                die_once()
                return stored

            store.create = crashing_create  # type: ignore[method-assign]
        elif mode == "run-many":
            transition_many = store.transition_many

            def crashing_transition_many(
                self: Any, runs: Any, expected: Any, transition_many: Any = transition_many
            ) -> list[bool]:
                applied: list[bool] = transition_many(self, runs, expected)
                if runs and runs[0].status is RunStatus.RUNNING:
                    die_once()
                return applied

            store.transition_many = crashing_transition_many  # type: ignore[method-assign]
        else:
            transition = store.transition

            def crashing_transition(
                self: Any, run: Any, expected: Any, transition: Any = transition
            ) -> bool:
                applied = transition(self, run, expected)
                if run.status is RunStatus.RUNNING:
                    die_once()
                return applied

            store.transition = crashing_transition  # type: ignore[method-assign]
    from scheduler.cli.main import cli

    cli.main(["worker"], prog_name="scheduler")


if __name__ == "__main__":
    main()
