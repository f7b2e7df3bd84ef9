"""The wire format: what any producer may write, and what the worker refuses."""

from __future__ import annotations

import json

import pytest

from scheduler.codec import FORMAT_VERSION, MalformedRecordError, Op, decode, encode
from scheduler.model import TaskKey

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
        (_record(uk=...), "uniqueness_key"),
        (_record(at="soon"), "'at'"),
        (_record(at=True), "'at'"),
        (_record(at=1.5), "'at'"),
        (_record(data=[1]), "'data'"),
    ],
)
def test_malformed_records_are_refused_with_the_reason(value: bytes | None, reason: str) -> None:
    with pytest.raises(MalformedRecordError, match=reason):
        decode(value)
