"""ReloadMark: what a partition's next owner may skip, and how the mark stays true and small."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.actors.task_persistence import BEFORE_ALL, advanced_mark
from scheduler.engine.reload_mark import (
    MAX_ENCODED_BYTES,
    MAX_STRAGGLERS,
    MarkHolder,
    ReloadMark,
    just_before,
)
from scheduler.model import Task, TaskKey, TaskState, TaskStatus
from scheduler.stores.sqlite import SqliteTaskStore

BASE_MS = 1_767_225_600_000


def key(offset_ms: int, ordering_id: str = "o", uniqueness_key: str = "u") -> TaskKey:
    return TaskKey.from_ms(ordering_id, BASE_MS + offset_ms, uniqueness_key)


def test_rows_ahead_of_the_mark_leave_it_as_it_is() -> None:
    mark = ReloadMark(key(100).cursor)

    assert mark.covering([key(101), key(100, "p")]) is mark


def test_a_row_written_behind_the_mark_becomes_a_straggler() -> None:
    mark = ReloadMark(key(100).cursor, (key(5),))

    covered = mark.covering([key(50), key(100), key(5)])  # key(100) is `after` itself

    assert covered == ReloadMark(key(100).cursor, (key(5), key(50), key(100)))


def test_past_the_straggler_limit_the_mark_moves_back_before_the_earliest_new_row() -> None:
    held = tuple(key(i) for i in range(0, MAX_STRAGGLERS * 10, 10))  # full
    mark = ReloadMark(key(1_000_000).cursor, held)

    covered = mark.covering([key(35), key(500_000)])

    assert covered.after == just_before(BASE_MS + 35)
    assert covered.stragglers == tuple(k for k in held if k.scheduled_ms < BASE_MS + 35)
    # Nothing at or before the new `after` is live but the stragglers it kept: every key the
    # old mark or the new rows covered is either a straggler or after `after`.
    for k in (*held, key(35), key(500_000)):
        assert k in covered.stragglers or k.cursor > covered.after


def test_encoding_round_trips() -> None:
    mark = ReloadMark(key(100, "ordre ü", "x").cursor, (key(1, "a,b", '"q"'), key(2)))

    assert ReloadMark.decode(mark.encode()) == mark


def test_an_oversized_mark_keeps_its_earliest_stragglers_and_reads_from_the_rest() -> None:
    long_ids = [key(i, "o" * 500, f"u{i}") for i in range(MAX_STRAGGLERS)]
    mark = ReloadMark(key(10_000).cursor, tuple(long_ids))

    text = mark.encode()
    decoded = ReloadMark.decode(text)

    assert len(text.encode()) <= MAX_ENCODED_BYTES
    assert decoded is not None and 0 < len(decoded.stragglers) < MAX_STRAGGLERS
    assert decoded.stragglers == tuple(long_ids[: len(decoded.stragglers)])
    for k in long_ids:  # each key dropped from the stragglers is read again from `after`
        assert k in decoded.stragglers or k.cursor > decoded.after


def test_metadata_that_is_not_a_mark_means_no_mark() -> None:
    for text in ("", None, "not json", '[2,[1,"o","u"],[]]', json.dumps({"a": 1}), "[1]"):
        assert ReloadMark.decode(text) is None


def test_the_holder_counts_changes_and_covers_nothing_without_a_mark() -> None:
    holder = MarkHolder()
    holder.cover([key(1)])
    assert (holder.mark, holder.version) == (None, 0)

    holder.replace(ReloadMark(key(10).cursor))
    holder.cover([key(20)])  # ahead: no change
    assert holder.version == 1
    holder.cover([key(2)])
    assert holder.version == 2 and holder.mark == ReloadMark(key(10).cursor, (key(2),))
    assert ReloadMark.decode(holder.encoded()[1]) == holder.mark


# -- moving the mark over a store (TaskPersistence.advance_mark's step) -----------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteTaskStore]:
    opened = SqliteTaskStore(path=str(tmp_path / "store.db"))
    opened.open()
    yield opened
    opened.close()


def test_the_mark_steps_over_completed_rows_and_keeps_the_live_ones_it_passes(store) -> None:
    tasks = [Task.from_key(key(n), {}) for n in range(10)]
    store.write_tasks(0, tasks)
    done = [0, 1, 2, 4, 5, 7, 9]
    store.record_statuses(0, [TaskStatus(key(n), TaskState.SUCCEEDED) for n in done])
    # A final status whose row was not deleted yet (a crash in between): as good as completed.
    store.write_tasks(0, [tasks[9]])
    store.record_statuses(0, [TaskStatus(key(6), TaskState.RETRYING, attempts=2)])

    mark = advanced_mark(store, 0, ReloadMark(BEFORE_ALL), BASE_MS + 100)

    assert mark == ReloadMark((BASE_MS + 101, "", ""), (key(3), key(6), key(8)))
    # Later: 3 finished, 8 is still running. The mark drops 3 and keeps 8.
    store.record_statuses(0, [TaskStatus(key(3), TaskState.SUCCEEDED)])
    assert advanced_mark(store, 0, mark, BASE_MS + 100).stragglers == (key(6), key(8))


def test_with_the_stragglers_full_the_mark_stops_at_the_last_live_row_that_fits(store) -> None:
    live = [Task.from_key(key(n), {}) for n in range(MAX_STRAGGLERS + 5)]
    store.write_tasks(0, live)

    mark = advanced_mark(store, 0, ReloadMark(BEFORE_ALL), BASE_MS + 10_000)

    assert mark.stragglers == tuple(t.key for t in live[:MAX_STRAGGLERS])
    assert mark.after == live[MAX_STRAGGLERS - 1].key.cursor
    # Every live row is a straggler or after the mark: none is skipped by the next owner.
    rest = store.load_tasks(0, mark.after, BASE_MS + 10_000, 100)
    assert [row.task for row in rest] == live[MAX_STRAGGLERS:]
