"""The file poll of the batch queue: the order of applying a file and renaming it."""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path

from scheduler.batch.engine import IMPORTED_SUFFIX, BatchExecutor
from scheduler.batch.launching import control_task
from scheduler.batch.store import Changes
from scheduler.model import Task
from scheduler.stores.batch_sqlite import SqliteBatchStore
from tests.batch.helpers import P, seed_config, seed_job


class _Client:
    """Accepts every task at once (the poll enqueues its next poll and a wake)."""

    def schedule_task(self, task: Task) -> Future[int]:
        done: Future[int] = Future()
        done.set_result(0)
        return done


class _NoRuns:
    def get(self, run_id: str) -> None:
        return None


def test_a_polled_file_is_renamed_only_once_its_configuration_is_stored(tmp_path: Path) -> None:
    file = tmp_path / "jobs.json"
    file.write_text(json.dumps(seed_config(seed_job("a"))))
    store = SqliteBatchStore(path=str(tmp_path / "batch.db"))
    store.open()
    file_there_when_saved: list[bool] = []
    write = store.write

    def writing(changes: Changes, name: str = "default") -> None:
        if changes.configuration is not None:
            file_there_when_saved.append(file.exists())
        write(changes, name)

    store.write = writing  # type: ignore[method-assign]
    executor = BatchExecutor(
        store=store,
        runs=_NoRuns(),  # type: ignore[arg-type]
        client=_Client(),  # type: ignore[arg-type]
        file=file,
        clock=lambda: P("2000-01-01 00:00:00"),
    )
    try:
        executor(control_task("default", "poll", 0, "poll"), None)  # type: ignore[arg-type]
        stored = store.configuration()
    finally:
        store.close()
    # A reader (the API, `scheduler jobs`) finds the file or its stored configuration, never
    # neither; a crash before the write leaves the file to be read again.
    assert file_there_when_saved[0] is True
    assert stored is not None and stored.source == str(file)
    assert not file.exists() and Path(f"{file}{IMPORTED_SUFFIX}").exists()
