"""Task keys: validation, millisecond truncation and schedule order."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.errors import InvalidTaskKeyError, NaiveDatetimeError, TaskDataError, TaskRejected
from scheduler.model import (
    EARLIEST_MS,
    LATEST_MS,
    MAX_KEY_BYTES,
    Attempt,
    AttemptOutcome,
    Task,
    TaskKey,
    TaskState,
    TaskStatus,
    encode_data,
    from_epoch_ms,
    to_epoch_ms,
)

MOMENT = datetime(2026, 1, 1, 12, 0, 0, 123_999, tzinfo=UTC)


def test_a_naive_datetime_is_rejected() -> None:
    with pytest.raises(NaiveDatetimeError, match="no time zone"):
        TaskKey("a", datetime(2026, 1, 1), "u")


def test_scheduled_time_is_truncated_to_the_millisecond() -> None:
    key = TaskKey("a", MOMENT, "u")

    assert key.scheduled_ms == 1_767_268_800_123
    assert key.scheduled_time == MOMENT.replace(microsecond=123_000)


def test_the_same_instant_in_another_zone_is_the_same_key() -> None:
    elsewhere = MOMENT.astimezone(timezone(timedelta(hours=-5)))

    assert TaskKey("a", elsewhere, "u") == TaskKey("a", MOMENT, "u")
    assert hash(TaskKey("a", elsewhere, "u")) == hash(TaskKey("a", MOMENT, "u"))


def test_times_before_the_epoch_truncate_towards_the_past() -> None:
    before = datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=UTC)

    assert TaskKey("a", before, "u").scheduled_ms == -1


def test_keys_sort_by_time_then_ordering_id_then_uniqueness_key() -> None:
    later = MOMENT + timedelta(milliseconds=1)
    keys = [
        TaskKey("b", later, "1"),
        TaskKey("b", MOMENT, "2"),
        TaskKey("a", MOMENT, "9"),
        TaskKey("b", MOMENT, "1"),
    ]

    assert sorted(keys) == [keys[2], keys[3], keys[1], keys[0]]
    assert TaskKey("a", MOMENT, "u") < TaskKey("a", later, "u")


@pytest.mark.parametrize(
    ("ordering_id", "uniqueness_key", "reason"),
    [
        ("", "u", "empty"),
        ("   ", "u", "empty"),
        ("a", "", "empty"),
        ("a\x00b", "u", "NUL"),
        ("é" * (MAX_KEY_BYTES // 2 + 1), "u", "longer than"),
        (7, "u", "must be a string"),
        ("a", None, "must be a string"),
    ],
)
def test_bad_keys_are_rejected_with_the_reason(
    ordering_id: object, uniqueness_key: object, reason: str
) -> None:
    with pytest.raises(InvalidTaskKeyError, match=reason):
        TaskKey(ordering_id, MOMENT, uniqueness_key)  # type: ignore[arg-type]


def test_key_errors_are_task_rejections() -> None:
    with pytest.raises(TaskRejected):
        TaskKey("", MOMENT, "u")


def test_keys_and_tasks_are_immutable() -> None:
    task = Task("a", MOMENT, "u", {"x": 1})

    with pytest.raises(AttributeError):
        task.key.ordering_id = "b"
    with pytest.raises(AttributeError):
        task.data = {}


def test_task_data_must_be_a_json_mapping_within_the_limit() -> None:
    with pytest.raises(TaskDataError, match="mapping"):
        Task("a", MOMENT, "u", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(TaskDataError, match="JSON"):
        encode_data({"when": MOMENT}, max_bytes=1000)
    with pytest.raises(TaskDataError, match="over the limit"):
        encode_data({"blob": "x" * 100}, max_bytes=50)
    assert encode_data({"a": [1, None]}, max_bytes=100) == b'{"a":[1,null]}'


def test_final_states() -> None:
    assert {s for s in TaskState if s.is_final} == {
        TaskState.SUCCEEDED,
        TaskState.FAILED,
        TaskState.CANCELLED,
    }


@given(st.integers(min_value=EARLIEST_MS, max_value=LATEST_MS))
def test_every_millisecond_a_task_can_have_converts_both_ways_exactly(ms: int) -> None:
    """From about 2128 on, a float of seconds lost microseconds and the round trip a millisecond;
    `--at 253402300799999` was scheduled at ...799997."""
    assert to_epoch_ms(from_epoch_ms(ms)) == ms


def test_the_last_millisecond_converts_exactly() -> None:
    assert from_epoch_ms(LATEST_MS).isoformat() == "9999-12-31T23:59:59.999000+00:00"
    assert to_epoch_ms(from_epoch_ms(253402300799999)) == 253402300799999


def test_an_iso_string_with_a_zone_is_accepted_as_the_scheduled_time() -> None:
    task = Task("u", "2027-01-01T01:00:00+01:00", "k")
    assert task.scheduled_time == datetime(2027, 1, 1, tzinfo=UTC)
    assert Task("u", "2027-01-01T00:00:00Z", "k").key == task.key


@pytest.mark.parametrize(
    ("value", "error", "says"),
    [
        ("2027-01-01T00:00:00", NaiveDatetimeError, "add one, such as 2027-01-01T00:00:00Z"),
        ("next tuesday", InvalidTaskKeyError, "'next tuesday' is not an ISO 8601 time"),
        (1795732512000, InvalidTaskKeyError, "use scheduler.model.from_epoch_ms(ms)"),
    ],
)
def test_a_scheduled_time_that_is_not_an_aware_instant_is_a_clear_rejection(
    value: object, error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=re.escape(says)):
        Task("u", value, "k")  # type: ignore[arg-type]


def test_an_attempts_end_written_over_its_unwritten_start_keeps_the_fields_of_both():
    key = TaskKey.from_ms("o", 1_000, "u")
    start = Attempt(1, 1_500, worker="w1")
    end = Attempt(1, None, 1_700, AttemptOutcome.SUCCEEDED, exit_code=0)
    running = TaskStatus(key, TaskState.RUNNING, 1, updated_ms=1_500, attempt_log=(start,))
    done = TaskStatus(key, TaskState.SUCCEEDED, 1, updated_ms=1_700, attempt_log=(end,))
    merged = done.with_attempts(running.attempt_log)
    assert merged.state is TaskState.SUCCEEDED
    assert merged.attempt_log == (
        Attempt(1, 1_500, 1_700, AttemptOutcome.SUCCEEDED, exit_code=0, worker="w1"),
    )


def test_a_retrys_start_written_over_an_unwritten_failure_keeps_both_attempts_in_order():
    key = TaskKey.from_ms("o", 1_000, "u")
    failed = Attempt(1, 1_500, 1_600, AttemptOutcome.FAILED, error="boom")
    second = Attempt(2, 2_000, worker="w1")
    retrying = TaskStatus(key, TaskState.RETRYING, 1, updated_ms=1_600, attempt_log=(failed,))
    running = TaskStatus(key, TaskState.RUNNING, 2, updated_ms=2_000, attempt_log=(second,))
    assert running.with_attempts(retrying.attempt_log).attempt_log == (failed, second)
