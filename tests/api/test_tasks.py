"""The tasks endpoints through a real server: schedule, get, list, cancel, retry, rerun, drop."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from scheduler.api.auth import Role
from scheduler.api.schemas import Scheduled, TaskOut, TaskPage
from tests.api.conftest import wait_for
from tests.api.server import ApiServer

Call = Callable[..., httpx.Response]
READ, OPERATE, ADMIN = Role.READ, Role.OPERATE, Role.ADMIN


def _at(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def _task(ordering_id: str, key: str, seconds: float = 0.0, **data: Any) -> dict[str, Any]:
    return {
        "ordering_id": ordering_id,
        "scheduled_time": _at(seconds),
        "uniqueness_key": key,
        "data": data,
    }


def _tasks(call: Call, ordering_id: str, **params: Any) -> list[dict[str, Any]]:
    answer = call(READ, "GET", "/api/v1/tasks", params={"ordering_id": ordering_id, **params})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["tasks"])


def _state_of(call: Call, ordering_id: str, key: str) -> str | None:
    return next((t["state"] for t in _tasks(call, ordering_id) if t["uniqueness_key"] == key), None)


def _settled(call: Call, ordering_id: str, key: str, state: str) -> dict[str, Any]:
    wait_for(lambda: _state_of(call, ordering_id, key) == state, what=f"{key} to be {state}")
    return next(t for t in _tasks(call, ordering_id) if t["uniqueness_key"] == key)


def _key(task: dict[str, Any]) -> dict[str, str]:
    return {k: task[k] for k in ("ordering_id", "scheduled_time", "uniqueness_key")}


def test_a_scheduled_task_is_listed_and_runs_to_success(as_role: Call, ordering_id: str) -> None:
    answer = as_role(OPERATE, "POST", "/api/v1/tasks", json=_task(ordering_id, "a", note="hi"))
    assert answer.status_code == 201, answer.text
    assert answer.json()["count"] == 1
    assert answer.json()["keys"][0]["uniqueness_key"] == "a"
    done = _settled(as_role, ordering_id, "a", "succeeded")
    assert done["data"] == {"note": "hi"} and done["attempts"] == 1


def test_one_task_is_got_by_key_with_its_attempts(as_role: Call, ordering_id: str) -> None:
    as_role(OPERATE, "POST", "/api/v1/tasks", json=_task(ordering_id, "k", fail="boom"))
    failed = _settled(as_role, ordering_id, "k", "failed")
    answer = as_role(READ, "GET", "/api/v1/tasks/by-key", params=_key(failed))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["state"] == "failed" and "asked to fail: boom" in body["last_error"]
    assert [a["outcome"] for a in body["attempt_history"]] == ["failed"]


def test_an_unknown_task_is_a_404_that_says_how_to_find_it(as_role: Call) -> None:
    params = {"ordering_id": "nobody", "scheduled_time": _at(0), "uniqueness_key": "x"}
    answer = as_role(READ, "GET", "/api/v1/tasks/by-key", params=params)
    assert answer.status_code == 404
    assert answer.json()["error"] == "not_found"
    assert "ordering_id=nobody" in answer.json()["message"]


def test_a_wrong_path_or_method_says_what_was_asked_and_where_the_paths_are(
    as_role: Call,
) -> None:
    unknown = as_role(READ, "GET", "/api/v1/taskz")
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    assert "no path /api/v1/taskz" in unknown.json()["message"]
    assert "/openapi.json" in unknown.json()["message"]
    wrong = as_role(OPERATE, "DELETE", "/api/v1/programs")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET"
    assert wrong.json()["message"].startswith("DELETE is not allowed on /api/v1/programs")
    assert "it allows GET" in wrong.json()["message"]
    # Schedules are created by name: a POST on the collection points at the item's PUT.
    post = as_role(OPERATE, "POST", "/api/v1/schedules", json={})
    assert post.status_code == 405
    assert "PUT /api/v1/schedules/{name} does, for one item" in post.json()["message"]


def test_a_task_in_the_past_is_refused_with_schedule_tasks_message(as_role: Call) -> None:
    body = _task("late", "x", -3600)
    answer = as_role(OPERATE, "POST", "/api/v1/tasks", json=body)
    assert answer.status_code == 400
    assert "in the past, more than the grace window" in answer.json()["message"]


def test_a_body_off_the_schema_is_a_400_naming_each_field(as_role: Call) -> None:
    body = {"ordering_id": "o", "scheduled_time": "2030-01-01T00:00:00", "extra": 1}
    answer = as_role(OPERATE, "POST", "/api/v1/tasks", json=body)
    assert answer.status_code == 400
    fields = {item["field"] for item in answer.json()["fields"]}
    assert fields == {"body.scheduled_time", "body.uniqueness_key", "body.extra"}
    assert "body.scheduled_time" in answer.json()["message"]


def test_a_body_that_is_not_json_is_a_400(as_role: Call) -> None:
    answer = as_role(
        OPERATE,
        "POST",
        "/api/v1/tasks",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "bad_request"


def test_a_batch_is_scheduled_whole_or_not_at_all(as_role: Call, ordering_id: str) -> None:
    good = [_task(ordering_id, f"b{n}", 3600) for n in range(3)]
    bad = [*good, {**_task(ordering_id, "big", 3600), "data": {"x": "y" * 300_000}}]
    refused = as_role(OPERATE, "POST", "/api/v1/tasks/batch", json={"tasks": bad})
    assert refused.status_code == 400, refused.text
    assert _tasks(as_role, ordering_id) == []
    accepted = as_role(OPERATE, "POST", "/api/v1/tasks/batch", json={"tasks": good})
    assert accepted.status_code == 201 and accepted.json()["count"] == 3
    wait_for(lambda: len(_tasks(as_role, ordering_id)) == 3, what="three pending tasks")
    # The answer is `Scheduled`, its keys those the store lists, in the order they were sent.
    keys = Scheduled.model_validate(accepted.json()).keys
    listed = {t["uniqueness_key"]: t for t in _tasks(as_role, ordering_id)}
    assert [k.uniqueness_key for k in keys] == ["b0", "b1", "b2"]
    for key in keys:
        task = listed[key.uniqueness_key]
        assert (key.ordering_id, key.scheduled_time, key.partition) == (
            task["ordering_id"],
            task["scheduled_time"],
            task["partition"],
        )


def test_listings_are_paged_with_a_cursor_over_every_partition(as_role: Call) -> None:
    tasks = [_task(f"paged-{n}", "p", 7200) for n in range(12)]
    assert as_role(OPERATE, "POST", "/api/v1/tasks/batch", json={"tasks": tasks}).status_code == 201

    def all_pages() -> list[str]:
        seen, cursor = [], None
        while True:
            params: dict[str, Any] = {"limit": 5, "state": "pending"}
            if cursor:
                params["cursor"] = cursor
            page = as_role(READ, "GET", "/api/v1/tasks", params=params).json()
            assert len(page["tasks"]) <= 5
            seen += [t["ordering_id"] for t in page["tasks"]]
            cursor = page["next_cursor"]
            if cursor is None:
                return [name for name in seen if name.startswith("paged-")]

    seen = wait_for(lambda: (s := all_pages()) and len(s) == 12 and s, what="12 paged tasks")
    assert sorted(seen) == sorted(f"paged-{n}" for n in range(12))


def test_a_task_page_is_what_its_response_model_says(as_role: Call, ordering_id: str) -> None:
    task = _task(ordering_id, "modelled", 3600, text="ü", numbers=[1, 2.5], nested={"a": None})
    assert as_role(OPERATE, "POST", "/api/v1/tasks", json=task).status_code == 201
    page = wait_for(
        lambda: (
            (p := as_role(READ, "GET", "/api/v1/tasks", params={"ordering_id": ordering_id}))
            and p.json()["tasks"]
            and p
        ),
        what="the task listed",
    )
    assert page.headers["content-type"] == "application/json"
    assert TaskPage.model_validate(page.json()).model_dump(mode="json") == page.json()
    (shown,) = page.json()["tasks"]
    assert list(shown) == list(TaskOut.model_fields)
    assert shown["data"] == task["data"] and shown["state"] == "pending"


def test_a_bad_cursor_or_partition_is_a_400(as_role: Call) -> None:
    assert as_role(READ, "GET", "/api/v1/tasks", params={"cursor": "nope"}).status_code == 400
    answer = as_role(READ, "GET", "/api/v1/tasks", params={"partition": 9})
    assert answer.status_code == 400 and "there are 4" in answer.json()["message"]
    answer = as_role(READ, "GET", "/api/v1/tasks", params={"state": "sleeping"})
    assert answer.status_code == 400 and answer.json()["fields"][0]["field"] == "query.state[0]"


def test_a_pending_task_is_cancelled_and_a_finished_one_is_a_409(
    as_role: Call, ordering_id: str
) -> None:
    later = _task(ordering_id, "later", 3600)
    as_role(OPERATE, "POST", "/api/v1/tasks", json=later)
    pending = _settled(as_role, ordering_id, "later", "pending")
    answer = as_role(OPERATE, "POST", "/api/v1/tasks/cancel", json={"keys": [_key(pending)]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["count"] == 1
    _settled(as_role, ordering_id, "later", "cancelled")
    again = as_role(OPERATE, "POST", "/api/v1/tasks/cancel", json={"keys": [_key(pending)]})
    assert again.status_code == 409
    assert "only pending, running or retrying tasks can be cancelled" in again.json()["message"]


def test_cancel_takes_keys_only(as_role: Call) -> None:
    answer = as_role(OPERATE, "POST", "/api/v1/tasks/cancel", json={"filter": {"ordering_id": "x"}})
    assert answer.status_code == 400 and "keys" in answer.json()["message"]


def test_a_failed_task_is_retried_and_fails_again(as_role: Call, ordering_id: str) -> None:
    as_role(OPERATE, "POST", "/api/v1/tasks", json=_task(ordering_id, "r", fail="again"))
    failed = _settled(as_role, ordering_id, "r", "failed")

    def history() -> list[tuple[str, int]]:
        answer = as_role(READ, "GET", "/api/v1/tasks/by-key", params=_key(failed))
        return [(a["outcome"], a["started_ms"]) for a in answer.json()["attempt_history"]]

    ((_, first_start),) = wait_for(history, what="the first attempt's record")
    answer = as_role(OPERATE, "POST", "/api/v1/tasks/retry", json={"keys": [_key(failed)]})
    assert answer.status_code == 200, answer.text
    # A retry counts attempts from 1 again: the record is a new first attempt, started later.
    wait_for(
        lambda: [(o, s > first_start) for o, s in history()] == [("failed", True)],
        what="the retried attempt to fail",
    )


def test_retry_by_filter_dry_run_counts_without_sending(as_role: Call, ordering_id: str) -> None:
    for key in ("f1", "f2"):
        as_role(OPERATE, "POST", "/api/v1/tasks", json=_task(ordering_id, key, fail="x"))
    _settled(as_role, ordering_id, "f2", "failed")
    _settled(as_role, ordering_id, "f1", "failed")
    body = {"filter": {"ordering_id": ordering_id}, "dry_run": True}
    answer = as_role(OPERATE, "POST", "/api/v1/tasks/retry", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["count"] == 2 and answer.json()["dry_run"] is True
    assert [t["attempts"] for t in _tasks(as_role, ordering_id)] == [1, 1]


def test_a_filter_on_a_state_the_change_does_not_fit_is_a_400(as_role: Call) -> None:
    body = {"filter": {"ordering_id": "x", "states": ["succeeded"]}, "dry_run": True}
    answer = as_role(OPERATE, "POST", "/api/v1/tasks/retry", json=body)
    assert answer.status_code == 400
    assert "retry applies to failed tasks only" in answer.json()["message"]


def test_keys_and_filter_together_or_neither_are_a_400(as_role: Call) -> None:
    key = {"ordering_id": "x", "scheduled_time": _at(0), "uniqueness_key": "y"}
    both = {"keys": [key], "filter": {"ordering_id": "x"}}
    for body in (both, {}, {"filter": {}}):
        answer = as_role(OPERATE, "POST", "/api/v1/tasks/retry", json=body)
        assert answer.status_code == 400, body
        assert "one of the two" in answer.json()["message"]


def test_a_succeeded_task_is_rerun_with_new_data(as_role: Call, ordering_id: str) -> None:
    as_role(OPERATE, "POST", "/api/v1/tasks", json=_task(ordering_id, "again"))
    done = _settled(as_role, ordering_id, "again", "succeeded")
    body = {"keys": [_key(done)], "data": {"fail": "on the rerun"}}
    answer = as_role(OPERATE, "POST", "/api/v1/tasks/rerun", json=body)
    assert answer.status_code == 200, answer.text
    rerun = _settled(as_role, ordering_id, "again", "failed")
    assert "on the rerun" in rerun["last_error"]


def test_a_failed_task_is_dropped_by_an_admin(as_role: Call, ordering_id: str) -> None:
    as_role(OPERATE, "POST", "/api/v1/tasks", json=_task(ordering_id, "d", fail="x"))
    failed = _settled(as_role, ordering_id, "d", "failed")
    refused = as_role(OPERATE, "POST", "/api/v1/tasks/drop", json={"keys": [_key(failed)]})
    assert refused.status_code == 403
    answer = as_role(ADMIN, "POST", "/api/v1/tasks/drop", json={"keys": [_key(failed)]})
    assert answer.status_code == 200, answer.text
    wait_for(lambda: _tasks(as_role, ordering_id) == [], what="the dropped task to go")


def test_a_change_to_an_unknown_task_is_a_404_and_changes_nothing(as_role: Call) -> None:
    key = {"ordering_id": "ghost", "scheduled_time": _at(0), "uniqueness_key": "g"}
    answer = as_role(OPERATE, "POST", "/api/v1/tasks/retry", json={"keys": [key]})
    assert answer.status_code == 404
    assert answer.json()["message"].endswith("nothing was changed")


def test_the_dashboard_lists_failed_tasks_of_every_ordering_id_without_one(
    as_role: Call, server: ApiServer, tokens: dict[Role, str]
) -> None:
    # An operator's first question, "what failed?", needs no ordering id.
    failing = [f"dash-any-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for ordering_id in failing:
        as_role(OPERATE, "POST", "/api/v1/tasks", json=_task(ordering_id, "k", fail="boom"))
    for ordering_id in failing:
        _settled(as_role, ordering_id, "k", "failed")
    with httpx.Client(base_url=server.url) as viewer:
        viewer.post("/dashboard/login", data={"token": tokens[READ]})
        page = viewer.get("/dashboard/tasks", params={"state": "failed"}).text
        body = viewer.get("/dashboard/tasks/body", params={"state": "failed"}).text
    for ordering_id in failing:
        assert f'href="/dashboard/tasks?ordering_id={ordering_id}">{ordering_id}</a>' in body
        assert ordering_id in page
    assert 'hx-get="/dashboard/tasks/body' not in page  # read once, not every 2 s
    assert "<th>Ordering id</th>" in body and "succeeded" not in body
