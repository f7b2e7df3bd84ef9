"""The RunStore contract, run against SQLite and Cassandra (see the `run_store` fixture)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from scheduler.programs.abc import RunStore, run_cursor
from scheduler.programs.model import ACTIVE, Run, RunStatus, StartedBy, StarterKind, run_id_for
from tests.contracts.conftest import SHORT_RETENTION_S

BASE_MS = 1_767_225_600_000


def a_run(
    program: str = "clean", request: str = "r1", created_ms: int = BASE_MS, **kw: object
) -> Run:
    return Run(
        run_id=run_id_for(program, request),
        program=program,
        started_by=StartedBy(StarterKind.OPERATOR, "ann"),
        arguments={"table": "clicks", "_logical_time": "2026-01-01T00:00:00Z"},
        status=RunStatus.PENDING,
        created_ms=created_ms,
        requested_ms=created_ms - 5,
        request_key=request,
        **kw,  # type: ignore[arg-type]
    )


def test_a_created_run_reads_back_with_every_field(run_store: RunStore) -> None:
    run = a_run(attempts=0, last_error=None)
    assert run_store.create(run) == run
    assert run_store.get(run.run_id) == run


def test_creating_a_run_id_again_keeps_and_returns_the_first_record(run_store: RunStore) -> None:
    first = a_run()
    run_store.create(first)
    second = a_run(created_ms=BASE_MS + 1000)
    assert run_store.create(second) == first
    assert run_store.get(first.run_id) == first
    assert len(run_store.list_runs(program="clean")) == 1


def test_concurrent_creates_of_one_run_id_store_one_run(run_store: RunStore) -> None:
    copies = [a_run(created_ms=BASE_MS + i) for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(run_store.create, copies))
    assert len({answer.created_ms for answer in answers}) == 1
    assert run_store.get(copies[0].run_id) == answers[0]


def test_a_missing_run_is_none(run_store: RunStore) -> None:
    assert run_store.get(run_id_for("clean", "never")) is None


def test_a_transition_applies_only_from_an_expected_status(run_store: RunStore) -> None:
    run = run_store.create(a_run())
    running = run.with_status(RunStatus.RUNNING, attempts=1, started_ms=BASE_MS + 10)
    assert run_store.transition(running, {RunStatus.PENDING})
    assert run_store.get(run.run_id) == running

    killed = run.with_status(RunStatus.KILLED, ended_ms=BASE_MS + 20)
    assert not run_store.transition(killed, {RunStatus.PENDING})
    assert run_store.get(run.run_id) == running

    done = running.with_status(RunStatus.COMPLETED, ended_ms=BASE_MS + 30)
    assert run_store.transition(done, {RunStatus.RUNNING})
    assert run_store.get(run.run_id) == done


def test_a_transition_of_a_missing_run_does_not_create_it(run_store: RunStore) -> None:
    ghost = a_run(request="ghost").with_status(RunStatus.RUNNING)
    assert not run_store.transition(ghost, ACTIVE)
    assert run_store.get(ghost.run_id) is None


def test_active_runs_are_the_pending_and_running_runs_of_one_program(run_store: RunStore) -> None:
    pending = run_store.create(a_run(request="p", created_ms=BASE_MS + 1))
    running = run_store.create(a_run(request="r", created_ms=BASE_MS + 2))
    run_store.transition(running.with_status(RunStatus.RUNNING, attempts=1), ACTIVE)
    ended = run_store.create(a_run(request="e", created_ms=BASE_MS + 3))
    run_store.transition(ended.with_status(RunStatus.FAILED, last_error="exit 1"), ACTIVE)
    run_store.create(a_run(program="other", request="o"))

    active = run_store.active("clean")
    assert [run.run_id for run in active] == [pending.run_id, running.run_id]
    assert [run.status for run in active] == [RunStatus.PENDING, RunStatus.RUNNING]


def test_lists_are_newest_first_and_filter_by_program_and_status(run_store: RunStore) -> None:
    made = [run_store.create(a_run(request=f"r{i}", created_ms=BASE_MS + i)) for i in range(5)]
    run_store.create(a_run(program="other", request="o", created_ms=BASE_MS + 100))
    run_store.transition(made[1].with_status(RunStatus.COMPLETED), ACTIVE)
    run_store.transition(made[3].with_status(RunStatus.COMPLETED), ACTIVE)

    assert [r.run_id for r in run_store.list_runs(program="clean")] == [
        r.run_id for r in reversed(made)
    ]
    assert [r.run_id for r in run_store.list_runs(program="clean", limit=2)] == [
        made[4].run_id,
        made[3].run_id,
    ]
    completed = run_store.list_runs(program="clean", statuses={RunStatus.COMPLETED})
    assert [r.run_id for r in completed] == [made[3].run_id, made[1].run_id]
    pending = run_store.list_runs(program="clean", statuses={RunStatus.PENDING})
    assert [r.run_id for r in pending] == [made[4].run_id, made[2].run_id, made[0].run_id]
    everything = run_store.list_runs()
    assert everything[0].program == "other"
    assert len(everything) == 6
    assert [r.status for r in run_store.list_runs(statuses={RunStatus.COMPLETED})] == [
        RunStatus.COMPLETED
    ] * 2


def test_runs_expire_after_the_retention(short_retention_run_store: RunStore) -> None:
    runs = short_retention_run_store
    made = runs.create(a_run(request="old"))
    assert runs.transition(made.with_status(RunStatus.RUNNING), {RunStatus.PENDING})
    assert runs.get(made.run_id) is not None
    # Cassandra expires in whole seconds: past the retention by more than one.
    time.sleep(SHORT_RETENTION_S + 1.2)
    assert runs.get(made.run_id) is None
    assert runs.list_runs() == []
    assert runs.active("clean") == []
    # An expired id can be made again: a new request of the same cause after the retention.
    assert runs.create(a_run(request="old")).status is RunStatus.PENDING


def _pages(run_store: RunStore, size: int, **where: Any) -> list[list[str]]:
    """Every page of a listing of `size` runs, each continued after the last run shown."""
    pages: list[list[str]] = []
    after = None
    while True:
        page = run_store.list_runs(limit=size, after=after, **where)
        if not page:
            return pages
        pages.append([run.run_id for run in page])
        after = run_cursor(page[-1])


def test_pages_after_a_cursor_list_every_run_once_in_order(run_store: RunStore) -> None:
    # Three runs share a millisecond: the cursor's run id orders them.
    made = [
        run_store.create(a_run(request=f"r{i}", created_ms=BASE_MS + min(i, 3))) for i in range(7)
    ]
    run_store.create(a_run(program="other", request="o", created_ms=BASE_MS + 2))
    for run in made[::2]:
        run_store.transition(run.with_status(RunStatus.COMPLETED), ACTIVE)

    whole = [r.run_id for r in run_store.list_runs(program="clean")]
    pages = _pages(run_store, 2, program="clean")
    assert [len(page) for page in pages] == [2, 2, 2, 1]
    assert [run_id for page in pages for run_id in page] == whole

    completed = [
        r.run_id for r in run_store.list_runs(program="clean", statuses={RunStatus.COMPLETED})
    ]
    completed_pages = _pages(run_store, 3, program="clean", statuses={RunStatus.COMPLETED})
    assert [run_id for page in completed_pages for run_id in page] == completed
    assert len(completed) == 4

    pending = _pages(run_store, 2, program="clean", statuses={RunStatus.PENDING})
    assert sorted(run_id for page in pending for run_id in page) == sorted(
        r.run_id for r in made[1::2]
    )

    everything = _pages(run_store, 3)
    assert [run_id for page in everything for run_id in page] == [
        r.run_id for r in run_store.list_runs()
    ]
    assert sum(len(page) for page in everything) == 8


def test_a_run_created_between_pages_does_not_shift_the_next_page(run_store: RunStore) -> None:
    made = [run_store.create(a_run(request=f"r{i}", created_ms=BASE_MS + i)) for i in range(4)]
    first = run_store.list_runs(program="clean", limit=2)
    run_store.create(a_run(request="new", created_ms=BASE_MS + 100))
    second = run_store.list_runs(program="clean", limit=2, after=run_cursor(first[-1]))
    assert [r.run_id for r in second] == [made[1].run_id, made[0].run_id]


def test_creating_many_runs_keeps_each_existing_record_and_returns_the_stored_ones(
    run_store: RunStore,
) -> None:
    existing = run_store.create(a_run(request="r1"))
    again = a_run(request="r1", created_ms=BASE_MS + 1000)
    new = [a_run(request=f"r{i}") for i in (2, 3)]
    assert run_store.create_many([again, *new]) == [existing, *new]
    assert run_store.create_many([]) == []
    assert len(run_store.list_runs(program="clean")) == 3
    assert len(run_store.active("clean")) == 3


def test_a_run_id_twice_in_one_create_many_is_created_once_as_first_given(
    run_store: RunStore,
) -> None:
    first = a_run(request="r9")
    second = a_run(request="r9", created_ms=BASE_MS + 1000)
    other = a_run(request="r10")
    assert run_store.create_many([first, other, second]) == [first, other, first]
    assert run_store.get(first.run_id) == first
    assert len(run_store.list_runs(program="clean")) == 2


def test_many_runs_read_back_by_id_without_the_missing_ones(run_store: RunStore) -> None:
    runs = run_store.create_many([a_run(request=f"r{i}") for i in range(3)])
    missing = run_id_for("clean", "never")
    found = run_store.get_many([runs[2].run_id, missing, runs[0].run_id])
    assert found == {runs[2].run_id: runs[2], runs[0].run_id: runs[0]}
    assert run_store.get_many([]) == {}


def test_a_transition_of_many_runs_applies_to_each_only_from_an_expected_status(
    run_store: RunStore,
) -> None:
    pending, running, ended = run_store.create_many([a_run(request=f"r{i}") for i in range(3)])
    assert run_store.transition(running.with_status(RunStatus.RUNNING), {RunStatus.PENDING})
    assert run_store.transition(ended.with_status(RunStatus.KILLED), {RunStatus.PENDING})
    missing = a_run(request="never")
    changes = [
        run.with_status(RunStatus.COMPLETED, ended_ms=BASE_MS + 9)
        for run in (pending, running, ended, missing)
    ]
    assert run_store.transition_many(changes, {RunStatus.RUNNING}) == [False, True, False, False]
    stored = run_store.get_many([pending.run_id, running.run_id, ended.run_id])
    assert [stored[r.run_id].status for r in (pending, running, ended)] == [
        RunStatus.PENDING,
        RunStatus.COMPLETED,
        RunStatus.KILLED,
    ]
    assert run_store.get(missing.run_id) is None
    assert [r.run_id for r in run_store.active("clean")] == [pending.run_id]
    assert run_store.transition_many([], ACTIVE) == []


def test_a_run_of_a_batch_reads_back_with_its_batch(run_store: RunStore) -> None:
    run = run_store.create(a_run(request="r1", batch="runs:clean:0123"))
    assert run_store.get(run.run_id) == run
    assert run.batch == "runs:clean:0123"


def test_a_shortened_run_id_names_the_one_newest_run_that_starts_with_it(
    run_store: RunStore,
) -> None:
    """`scheduler runs show|kill` take an id's first characters, as the dashboard shows them."""
    import pytest

    from scheduler.errors import AmbiguousRunIdError
    from scheduler.programs.operator import whole_run_id

    runs = [a_run(request=f"prefix-{i}", created_ms=BASE_MS + i) for i in range(30)]
    twins = [
        replace(a_run(request=f"twin-{i}", created_ms=BASE_MS + 100 + i), run_id=run_id)
        for i, run_id in enumerate(
            ["feedbeef-1111-5000-8000-000000000001", "feedbeef-2222-5000-8000-000000000002"]
        )
    ]
    for run in runs + twins:
        run_store.create(run)
    target = runs[7]
    assert whole_run_id(run_store, target.run_id[:8]) == target.run_id
    assert whole_run_id(run_store, target.run_id) == target.run_id
    assert whole_run_id(run_store, "0123abcd") == "0123abcd"  # none: said not found by its caller
    with pytest.raises(AmbiguousRunIdError, match="'feedbeef' starts 2 run ids"):
        whole_run_id(run_store, "feedbeef")
    assert whole_run_id(run_store, "feedbeef-2222") == twins[1].run_id
