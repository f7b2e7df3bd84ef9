"""The batch body read by hand (orjson, a check per task) takes and refuses what `TasksIn` does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.exceptions import RequestValidationError

from scheduler.api.bodies import parse_tasks
from scheduler.api.schemas import TasksIn
from scheduler.errors import InvalidTaskKeyError
from scheduler.model import Task

JSON = "application/json"


def _body(*tasks: dict[str, Any]) -> bytes:
    return json.dumps({"tasks": list(tasks)}).encode()


def _task(when: Any = "2027-01-31T14:00:00Z", **extra: Any) -> dict[str, Any]:
    return {"ordering_id": "o", "scheduled_time": when, "uniqueness_key": "k", **extra}


def _as_pydantic_builds(raw: bytes) -> list[Task]:
    body = TasksIn.model_validate_json(raw)
    return [Task(t.ordering_id, t.scheduled_time, t.uniqueness_key, t.data) for t in body.tasks]


def _problems(raw: bytes, content_type: str | None = JSON) -> list[dict[str, Any]]:
    with pytest.raises(RequestValidationError) as refused:
        parse_tasks(raw, content_type)
    return [{"loc": p["loc"], "msg": p["msg"], "type": p["type"]} for p in refused.value.errors()]


@pytest.mark.parametrize(
    "when",
    [
        "2027-01-31T14:00:00Z",
        "2027-01-31T14:00:00+02:00",
        "2027-01-31 14:00:00.5-05:30",
        "2027-01-31T14:00:00.123456+00:00",
        1_800_000_000,  # a number: not the fast path's, taken as before
        "2027-01-31T14:00Z",  # no seconds: not the fast path's either
    ],
)
def test_the_tasks_read_are_those_the_pydantic_model_reads(when: Any) -> None:
    raw = _body(_task(when, data={"n": 1, "s": "é"}), _task(when, uniqueness_key="k2"))
    tasks = parse_tasks(raw, JSON)
    assert [(t.key, t.data) for t in tasks] == [(t.key, t.data) for t in _as_pydantic_builds(raw)]
    assert tasks[1].data == {}


def test_tasks_sharing_a_time_string_and_tasks_with_others_each_get_their_own_time() -> None:
    times = ["2027-01-31T14:00:00Z", "2027-01-31T15:00:00+01:00", "2027-01-31T14:00:00.5Z"]
    raw = _body(*(_task(times[n % 3], uniqueness_key=f"k{n}") for n in range(9)))
    tasks = parse_tasks(raw, JSON)
    assert [t.key for t in tasks] == [t.key for t in _as_pydantic_builds(raw)]
    assert len({t.key.scheduled_ms for t in tasks}) == 2  # 14:00Z and 15:00+01:00 are one


def test_a_time_string_seen_before_does_not_excuse_a_bad_one_after_it() -> None:
    raw = _body(
        _task(), _task(uniqueness_key="k2"), _task("2027-01-31T14:00:00", uniqueness_key="k3")
    )
    assert [p["loc"] for p in _problems(raw)] == [("body", "tasks", 2, "scheduled_time")]


def test_a_time_without_a_zone_is_refused_naming_the_field() -> None:
    assert _problems(_body(_task(), _task("2027-01-31T14:00:00"))) == [
        {
            "loc": ("body", "tasks", 1, "scheduled_time"),
            "msg": "Input should have timezone info",
            "type": "timezone_aware",
        }
    ]


def test_an_unknown_field_or_a_missing_one_is_refused_as_the_model_refuses_it() -> None:
    missing = {"ordering_id": "o", "scheduled_time": "2027-01-31T14:00:00Z"}
    problems = _problems(_body(_task(colour="red"), missing))
    assert {(p["loc"], p["type"]) for p in problems} == {
        (("body", "tasks", 0, "colour"), "extra_forbidden"),
        (("body", "tasks", 1, "uniqueness_key"), "missing"),
    }


def test_data_that_is_not_an_object_and_ids_that_are_not_strings_are_refused() -> None:
    problems = _problems(_body(_task(data=[1]), {**_task(), "ordering_id": 7}))
    assert {(p["loc"], p["type"]) for p in problems} == {
        (("body", "tasks", 0, "data"), "dict_type"),
        (("body", "tasks", 1, "ordering_id"), "string_type"),
    }


def test_an_empty_list_or_more_than_ten_thousand_tasks_is_refused() -> None:
    assert _problems(_body())[0]["type"] == "too_short"
    assert _problems(_body(*[_task()] * 10_001))[0]["type"] == "too_long"


def test_json_that_only_the_stdlib_reads_is_still_read_as_before() -> None:
    raw = _body(_task(data={"x": float("nan")}))  # NaN: orjson refuses it, json does not
    assert b"NaN" in raw
    tasks = parse_tasks(raw, JSON)
    assert tasks[0].key == _task_key() and tasks[0].data["x"] != tasks[0].data["x"]


def _task_key() -> Any:
    return Task("o", TasksIn.model_validate({"tasks": [_task()]}).tasks[0].scheduled_time, "k").key


def test_bad_json_an_empty_body_and_another_content_type_are_400s_as_fastapi_says() -> None:
    assert _problems(b'{"tasks": [') == [
        {"loc": ("body", 11), "msg": "JSON decode error", "type": "json_invalid"}
    ]
    assert _problems(b"") == [{"loc": ("body",), "msg": "Field required", "type": "missing"}]
    assert _problems(_body(_task()), "text/plain")[0]["loc"] == ("body",)
    assert _problems(_body(_task()), None)[0]["loc"] == ("body",)
    assert parse_tasks(_body(_task()), "application/vnd.api+json; charset=utf-8")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ordering_id", ""),
        ("ordering_id", " \t"),
        ("uniqueness_key", "a\x00b"),
        ("uniqueness_key", "é" * 257),  # 257 characters, 514 UTF-8 bytes: over 512
        ("ordering_id", "k" * 513),
    ],
)
def test_a_key_part_the_fast_path_doubts_is_refused_by_the_task_naming_it(
    field: str, value: str
) -> None:
    with pytest.raises(InvalidTaskKeyError, match=field):
        parse_tasks(_body(_task(), _task(**{field: value})), JSON)


def test_key_parts_at_the_length_limit_are_taken_and_make_the_keys_task_makes() -> None:
    longest = {"ordering_id": "é" * 256, "uniqueness_key": "\U0001f600" * 128}  # 512 bytes each
    raw = _body(_task(**longest), _task("2027-01-31T14:00:00.999999-01:30", data={"n": [1]}))
    tasks = parse_tasks(raw, JSON)
    built = _as_pydantic_builds(raw)
    assert [(t.key, hash(t.key), t.data) for t in tasks] == [
        (t.key, hash(t.key), t.data) for t in built
    ]
    assert tasks[1].key.scheduled_ms == built[1].key.scheduled_ms == 1_801_409_400_999
