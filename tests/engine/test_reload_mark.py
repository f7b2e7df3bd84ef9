"""ReloadMark: what a partition's next owner may skip, and how the mark stays true and small."""

from __future__ import annotations

import json

from scheduler.engine.reload_mark import (
    MAX_ENCODED_BYTES,
    MAX_STRAGGLERS,
    MarkHolder,
    ReloadMark,
    just_before,
)
from scheduler.model import TaskKey

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
