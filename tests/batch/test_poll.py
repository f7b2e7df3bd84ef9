"""The file poll of the batch queue: the order of applying a file and renaming it."""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path

import pytest

from scheduler.batch.engine import IMPORTED_SUFFIX, BatchExecutor
from scheduler.batch.launching import control_task
from scheduler.batch.store import Changes
from scheduler.engine.clock import now_ms
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


def _executor(tmp_path: Path, file: Path) -> tuple[BatchExecutor, SqliteBatchStore]:
    store = SqliteBatchStore(path=str(tmp_path / "batch.db"))
    store.open()
    executor = BatchExecutor(
        store=store,
        runs=_NoRuns(),  # type: ignore[arg-type]
        client=_Client(),  # type: ignore[arg-type]
        file=file,
        clock=lambda: P("2000-01-01 00:00:00"),
    )
    return executor, store


def test_a_changed_file_is_applied_by_the_next_task_of_the_queue_whatever_its_op(
    tmp_path: Path,
) -> None:
    # A busy queue (runs' ends) reloads at its next task, not behind them at the next poll.
    file = tmp_path / "jobs.json"
    executor, store = _executor(tmp_path, file)
    try:
        executor(control_task("default", "decide", 0, "d1"), None)  # type: ignore[arg-type]
        assert store.configuration() is None
        text = json.dumps(seed_config(seed_job("a")))
        file.write_text(text)
        executor(control_task("default", "decide", 0, "d2"), None)  # type: ignore[arg-type]
        stored = store.configuration()
    finally:
        store.close()
    assert stored is not None and stored.text == text and stored.source == str(file)
    assert not file.exists() and Path(f"{file}{IMPORTED_SUFFIX}").read_text() == text


NONE_YET = "is not valid; no batch configuration is in force yet; the next poll reads it again"


def test_an_invalid_file_is_logged_once_by_other_tasks_and_at_every_poll(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "jobs.json"
    file.write_text('{"max_parallelism": 1}')
    executor, store = _executor(tmp_path, file)
    try:
        for key in ("d1", "d2", "d3"):
            executor(control_task("default", "decide", 0, key), None)  # type: ignore[arg-type]
        by_others = caplog.text.count(NONE_YET)
        executor(control_task("default", "poll", 0, "p1"), None)  # type: ignore[arg-type]
        executor(control_task("default", "poll", 0, "p2"), None)  # type: ignore[arg-type]
        stored = store.configuration()
    finally:
        store.close()
    assert by_others == 1
    assert caplog.text.count(NONE_YET) == 3
    assert "the last good one" not in caplog.text  # there was none
    assert stored is None and file.exists()


class _Keeping(_Client):
    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def schedule_task(self, task: Task) -> Future[int]:
        self.tasks.append(task)
        return super().schedule_task(task)


def test_a_poll_that_finds_no_file_polls_again_at_the_setting_until_a_configuration_is_in_force(
    tmp_path: Path,
) -> None:
    # Not at the seed's 2 minutes: a file written just after a worker's first poll is read
    # within the setting's period.
    store = SqliteBatchStore(path=str(tmp_path / "batch.db"))
    store.open()
    client = _Keeping()
    executor = BatchExecutor(
        store=store,
        runs=_NoRuns(),  # type: ignore[arg-type]
        client=client,  # type: ignore[arg-type]
        file=tmp_path / "jobs.json",
        clock=lambda: 10_500,
        poll_ms=1000,
    )
    try:
        executor(control_task("default", "poll", 0, "poll"), None)  # type: ignore[arg-type]
    finally:
        store.close()
    polls = [t for t in client.tasks if t.data["op"] == "poll"]
    assert len(polls) == 1
    assert polls[0].key.uniqueness_key == "poll"
    assert polls[0].key.scheduled_ms - now_ms() <= 1000  # 500 ms to the next whole second
