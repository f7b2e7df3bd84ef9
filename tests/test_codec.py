"""The wire format: what any producer may write, and what the worker refuses."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.codec import (
    FORMAT_VERSION,
    MalformedRecordError,
    Op,
    _checked_command,
    compact,
    decode,
    encode,
    encode_schedule,
    loads_record,
)
from scheduler.errors import TaskDataError
from scheduler.model import TaskKey, encode_data

KEY = TaskKey.from_ms("schedule:daily-étl", 1_767_225_600_123, "run-1")


@pytest.mark.parametrize("op", list(Op))
def test_every_op_round_trips(op: Op) -> None:
    command = decode(encode(op, KEY, b'{"job":"x","n":[1,2]}'))

    assert command.op is op
    assert command.task.key == KEY
    assert command.task.data == {"job": "x", "n": [1, 2]}


def test_encoded_records_are_plain_json_any_client_can_write() -> None:
    message = json.loads(encode(Op.SCHEDULE, KEY))

    assert message == {
        "v": FORMAT_VERSION,
        "op": "schedule",
        "oid": KEY.ordering_id,
        "at": KEY.scheduled_ms,
        "uk": KEY.uniqueness_key,
        "data": {},
    }


@pytest.mark.parametrize("moment", [datetime.min, datetime.max])
def test_the_first_and_last_dates_a_task_can_have_decode(moment: datetime) -> None:
    key = TaskKey("a", moment.replace(tzinfo=UTC), "u")
    assert decode(encode(Op.SCHEDULE, key)).task.key == key


def test_a_record_without_data_decodes_with_empty_data() -> None:
    value = json.dumps({"v": 1, "op": "cancel", "oid": "a", "at": 5, "uk": "u"}).encode()

    assert decode(value).task.data == {}


def _record(**changes: object) -> bytes:
    message: dict[str, object] = {"v": 1, "op": "schedule", "oid": "a", "at": 5, "uk": "u"}
    message.update(changes)
    return json.dumps({k: v for k, v in message.items() if v is not ...}).encode()


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "no value"),
        (b"\xff\xfe", "not JSON"),
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (_record(v=2), "version"),
        (_record(v=...), "version"),
        (_record(op="explode"), "explode"),
        (_record(oid=""), "ordering_id"),
        (_record(oid=7), "ordering_id"),
        (_record(uk=...), r"record has no 'uk' \(the uniqueness key\)"),
        (_record(op=..., at=...), r"no 'op' \(the operation\), 'at' \(the scheduled time"),
        (_record(uk=None), "uniqueness_key must be a string"),
        (_record(at="soon"), "'at'"),
        (_record(at=True), "'at'"),
        (_record(at=1.5), "'at'"),
        (_record(at=10**30), "years 1 to 9999"),
        (_record(at=253_402_300_800_000), "years 1 to 9999"),  # 10000-01-01
        (_record(at=-62_135_596_800_001), "years 1 to 9999"),  # just before 0001-01-01
        (_record(data=[1]), "'data'"),
        (_record(oid=" \t"), "ordering_id is empty"),
        (_record(uk="a\x00b"), "NUL"),
        (_record(op=["schedule"]), "unknown op"),
        (_record(oid="é" * 300), "longer than 512 UTF-8 bytes"),
        (b'{"v": 1, "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ],
)
def test_malformed_records_are_refused_with_the_reason(value: bytes | None, reason: str) -> None:
    with pytest.raises(MalformedRecordError, match=reason):
        decode(value)


# JSON-shaped task data, including the corners where orjson and the standard library differ:
# NaN and infinities, non-string keys, integers past 64 bits, non-ASCII text, nulls.
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.integers(-3, 3), inner, max_size=4)
    ),
    max_leaves=12,
)
_data = st.dictionaries(st.text(max_size=6) | st.integers(-3, 3), _values, max_size=4)


def _two_step(data: dict, max_data_bytes: int) -> bytes | type[Exception]:
    try:
        return encode(Op.SCHEDULE, KEY, encode_data(data, max_bytes=max_data_bytes))
    except TaskDataError:
        return TaskDataError


@settings(max_examples=400, deadline=None)
@given(data=_data, max_data_bytes=st.sampled_from([20, 200, 100_000]))
def test_the_one_call_schedule_encoding_accepts_and_refuses_what_the_two_step_one_does(
    data: dict, max_data_bytes: int
) -> None:
    expected = _two_step(data, max_data_bytes)
    try:
        value = encode_schedule(KEY, data, max_data_bytes=max_data_bytes)
    except TaskDataError:
        assert expected is TaskDataError
        return
    assert expected is not TaskDataError
    assert json.loads(value) == json.loads(expected)  # type: ignore[arg-type]


def test_schedule_encoding_refuses_nan_the_fast_encoder_would_write_as_null() -> None:
    with pytest.raises(TaskDataError, match="cannot be serialised as JSON"):
        encode_schedule(KEY, {"ratio": float("nan")}, max_data_bytes=1000)


def test_schedule_encoding_refuses_dates_rather_than_writing_a_string() -> None:
    with pytest.raises(TaskDataError, match="cannot be serialised as JSON"):
        encode_schedule(KEY, {"at": datetime.now(UTC)}, max_data_bytes=1000)


def retained_bytes(make: Callable[[int], bytes], count: int) -> int:
    """Bytes still allocated (tracemalloc's count: exact, not timed) by `count` values kept."""
    tracemalloc.start()
    try:
        kept = [make(n) for n in range(count)]
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == count
    return size


def test_a_compacted_record_takes_its_own_size_not_the_encoders_buffer() -> None:
    """orjson hands back its whole output buffer (about 4 KB for a 60-byte record); anything that
    keeps records (the embedded log's tail, a bulk call's batch) keeps a compact copy."""

    def record(n: int) -> bytes:
        return encode_schedule(TaskKey.from_ms(f"o-{n}", 1_700_000_000_000, "k"), {}, 1 << 20)

    as_encoded = retained_bytes(record, 1000)
    compacted = retained_bytes(lambda n: compact(record(n)), 1000)
    assert compact(record(7)) == record(7)
    assert compacted < 200 * 1000  # 63-byte records, plus the list
    assert compacted * 5 < as_encoded or as_encoded < 200 * 1000  # a future orjson may shrink


def test_an_unknown_op_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(MalformedRecordError) as refused:
        decode(_record(op="explode"))
    assert "unknown op 'explode'; a record's op is one of schedule, cancel" in str(refused.value)


@settings(max_examples=400, deadline=None)
@given(value=_values, spaced=st.booleans())
def test_a_record_reads_as_the_standard_library_reads_it_nan_and_long_integers_included(
    value: object, spaced: bool
) -> None:
    text = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":"))
    read = loads_record(text.encode("utf-8"))
    # Compared as JSON text: NaN differs from itself, and 2**70 must stay an int, not a float.
    assert json.dumps(read) == json.dumps(json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        '{"n": 18446744073709551617}',
        '{"n": -9223372036854775809}',
        '{"n": NaN, "i": -Infinity}',
        '{"n": 1e400}',
        '{"s": "\\ud800"}',
    ],
)
def test_the_corners_where_orjson_reads_differently_decode_as_before(text: str) -> None:
    head = '{"v": 1, "op": "schedule", "oid": "o", "at": 1767225600123, "uk": "u", "data": '
    value = (head + text + "}").encode("utf-8")
    expected = json.loads(text)
    assert json.dumps(decode(value).task.data) == json.dumps(expected)


def test_a_record_whose_key_part_is_a_long_integer_is_refused_naming_that_integer() -> None:
    value = b'{"v": 1, "op": "schedule", "oid": 18446744073709551617, "at": 1, "uk": "u"}'
    with pytest.raises(MalformedRecordError, match="18446744073709551617"):
        decode(value)


_key_parts = st.sampled_from(["a", " ", "", "a\x00", "é" * 128, "é" * 257, "x" * 513, 7, None])


@settings(max_examples=400, deadline=None)
@given(
    op=st.sampled_from(["schedule", "cancel", "explode", ["schedule"], None, ...]),
    oid=_key_parts | st.just(...),
    uk=_key_parts,
    at=st.sampled_from([5, 1_767_225_600_123, True, 1.5, "5", 10**30, -62_135_596_800_001, ...]),
    v=st.sampled_from([1, 2, True, ...]),
    data=st.sampled_from([{}, {"n": 1}, [1], None, ...]),
)
def test_every_record_decodes_as_every_check_in_turn_would_decode_it(
    op: object, oid: object, uk: object, at: object, v: object, data: object
) -> None:
    value = _record(op=op, oid=oid, uk=uk, at=at, v=v, data=data)

    def outcome(read: Callable[[], object]) -> object:
        try:
            return read()
        except MalformedRecordError as error:
            return str(error)

    assert outcome(lambda: decode(value)) == outcome(lambda: _checked_command(json.loads(value)))
