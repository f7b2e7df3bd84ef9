"""`scheduler enqueue-many`: a JSON Lines file of tasks, every line checked before any is sent."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest

from scheduler.cli.enqueue_many import LineError, parse_line
from tests.cli.helpers import wait_for

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text(
        "".join((json.dumps(line) if not isinstance(line, str) else line) + "\n" for line in lines)
    )
    return path


def test_a_line_gives_its_ordering_id_time_key_and_data():
    task = parse_line(
        '{"ordering_id": "o-1", "at": "2030-01-02T00:00:00Z", "key": "k", "data": {"n": 1}}', NOW
    )
    assert (task.ordering_id, task.scheduled_time, task.uniqueness_key, dict(task.data)) == (
        "o-1",
        datetime(2030, 1, 2, tzinfo=UTC),
        "k",
        {"n": 1},
    )
    assert parse_line('{"ordering_id": "o", "in": "1h30m"}', NOW).scheduled_time == datetime(
        2030, 1, 1, 1, 30, tzinfo=UTC
    )
    assert parse_line('{"ordering_id": "o", "at": 1893456000000}', NOW).scheduled_ms == (
        1893456000000
    )
    assert parse_line('{"ordering_id": "o"}', NOW).scheduled_time == NOW


def test_a_line_without_a_key_gets_one_from_its_content():
    line = '{"ordering_id": "o", "at": "2030-01-02T00:00:00Z", "data": {"a": 1, "b": 2}}'
    same_fields_reordered = (
        '{"data": {"b": 2, "a": 1}, "at": "2030-01-02T00:00:00Z", "ordering_id": "o"}'
    )
    other_data = '{"ordering_id": "o", "at": "2030-01-02T00:00:00Z", "data": {"a": 2}}'
    key = parse_line(line, NOW).uniqueness_key
    assert parse_line(same_fields_reordered, NOW).uniqueness_key == key
    assert parse_line(other_data, NOW).uniqueness_key != key
    assert len(key) == 36


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nope", "not a JSON object"),
        ("[1]", "not a JSON object (a list)"),
        ('{"ordering_id": "o", "time": 1}', "unknown field(s) ['time']"),
        ('{"at": "2030-01-01T00:00:00Z"}', '"ordering_id" is missing'),
        ('{"ordering_id": "o", "data": [1]}', '"data" must be a JSON object'),
        ('{"ordering_id": "o", "key": 7}', '"key" must be a string'),
        ('{"ordering_id": "o", "at": 1, "in": "5m"}', 'give "at" or "in", not both'),
        ('{"ordering_id": "o", "at": true}', '"at" must be a string'),
        ('{"ordering_id": "o", "in": 5}', '"in" must be a duration string'),
        ('{"ordering_id": "o", "in": "9000000d"}', "the task would be due after 9999-12-31"),
        ('{"ordering_id": "o", "at": 99999999999999999}', "is out of range"),
    ],
)
def test_a_line_that_is_not_a_task_says_why(text, says):
    with pytest.raises((LineError, click.BadParameter)) as refused:
        parse_line(text, NOW)
    message = refused.value
    assert says in (
        message.format_message() if isinstance(message, click.BadParameter) else str(message)
    )


def test_a_file_with_bad_lines_sends_nothing_and_names_each_line(run, embedded, tmp_path):
    lines: list[object] = [
        {"ordering_id": "good", "in": "1h"},
        "{broken",
        {"ordering_id": "late", "at": "2020-01-01T00:00:00Z"},
        "",
        {"ordering_id": "o", "at": "2030-01-01T00:00:00"},
        {"ordering_id": "o", "in": "5 parsecs"},
    ]
    result = run("enqueue-many", str(write_lines(tmp_path / "tasks.jsonl", lines)))

    assert result.exit_code == 2
    assert "tasks.jsonl has 4 bad line(s); nothing was sent" in result.output
    assert "line 2: not a JSON object" in result.output
    assert "line 3: task late/" in result.output and "in the past" in result.output
    assert "line 5: " in result.output and "has no time zone" in result.output
    assert "line 6: " in result.output and "is not a duration" in result.output
    assert "line 1:" not in result.output and "line 4:" not in result.output
    assert not (embedded / "log.db").exists()  # never even opened


def test_a_line_that_is_not_utf8_is_one_bad_line_and_a_bom_is_ignored(run, embedded, tmp_path):
    path = tmp_path / "t.jsonl"
    bom = b"\xef\xbb\xbf"
    path.write_bytes(
        bom + b'{"ordering_id": "a"}\r\n{"ordering_id": "\xff"}\n{"ordering_id": "c"}\n'
    )
    result = run("enqueue-many", "--check", str(path))
    assert result.exit_code == 2
    assert "has 1 bad line(s)" in result.output
    assert "line 2: not UTF-8 text" in result.output

    path.write_bytes(bom + b'{"ordering_id": "a"}\r\n')
    assert "1 task(s) in" in run("enqueue-many", "--check", str(path)).output


def test_only_the_first_bad_lines_are_listed(run, embedded, tmp_path):
    result = run("enqueue-many", str(write_lines(tmp_path / "t.jsonl", ["x"] * 25)))
    assert result.exit_code == 2
    assert "has 25 bad line(s)" in result.output
    assert "line 10:" in result.output and "line 11:" not in result.output
    assert "... and 15 more" in result.output


def test_the_executor_checks_every_line(run, embedded, tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "spark")
    job = {"job": "scheduler.examples.clicks.jobs:rollup_day"}
    lines = [{"ordering_id": "o", "in": "1h", "data": job}, {"ordering_id": "o"}]
    result = run("enqueue-many", str(write_lines(tmp_path / "t.jsonl", lines)))
    assert result.exit_code == 2
    assert "line 2: task o/" in result.output and "no job name" in result.output
    assert "line 1:" not in result.output


def test_check_reads_every_line_and_sends_nothing(run, embedded, tmp_path):
    lines = [{"ordering_id": f"o-{n}", "in": "1h"} for n in range(3)]
    result = run("enqueue-many", "--check", str(write_lines(tmp_path / "t.jsonl", lines)))
    assert result.exit_code == 0, result.output
    assert "3 task(s) in" in result.output and "nothing sent (--check)" in result.output
    assert not (embedded / "log.db").exists()


def test_an_empty_file_sends_nothing(run, embedded, tmp_path):
    result = run("enqueue-many", "--json", str(write_lines(tmp_path / "t.jsonl", ["", "  "])))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["tasks"] == 0


def listed(script, state: str) -> list[dict]:
    result = script("tasks", "list", "--state", state, "--limit", "10000", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def all_stored(script) -> bool:
    """Every record on the log is in the store: the group has committed up to the end."""
    status = script("group", "status", "--json")
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)
    return bool(rows) and all(row["lag"] == 0 for row in rows)


def test_tasks_from_standard_input_are_stored_once_even_when_sent_twice(
    script, worker, embedded, tmp_path
):
    """2,500 lines: three chunks. Sending the file again replaces its tasks (derived keys)."""
    lines = [
        {"ordering_id": f"o-{n % 7}", "at": "2030-01-01T00:00:00Z", "data": {"n": n}}
        for n in range(2500)
    ]
    path = write_lines(tmp_path / "t.jsonl", lines)
    for _ in range(2):
        sent = script("enqueue-many", "-", "--json", input=path.read_text())
        assert sent.returncode == 0, sent.stderr
        assert json.loads(sent.stdout)["tasks"] == 2500
    running = worker()

    assert wait_for(lambda: all_stored(script), timeout=120)
    pending = listed(script, "pending")
    assert sorted(row["data"]["n"] for row in pending) == list(range(2500))
    running.terminate()
    assert running.wait(timeout=30) == 0


def test_due_now_lines_are_due_when_sent_not_when_checked(run, embedded, tmp_path, monkeypatch):
    """A file that takes longer than the grace window to check (a large one) must not turn its
    due-now tasks into tasks in the past by the time it sends them."""
    import scheduler.client

    monkeypatch.setenv("SCHEDULER_GRACE_WINDOW_S", "1")
    checking = scheduler.client.check_task

    def slow_check(task, **settings):
        checking(task, **settings)
        time.sleep(1.5)  # past the grace window before anything is sent

    monkeypatch.setattr(scheduler.client, "check_task", slow_check)
    path = write_lines(tmp_path / "t.jsonl", [{"ordering_id": "o"}, {"ordering_id": "p"}])
    result = run("enqueue-many", str(path))
    assert result.exit_code == 0, result.output
    assert "enqueued 2 task(s)" in result.output


def test_a_line_inside_the_grace_window_when_checked_is_sent_however_long_the_file_takes(
    run, embedded, tmp_path, monkeypatch
):
    """Lines due a moment ago pass the check; sending a large file reaches them later, past the
    window. The check decided: they are sent (and run at once), not refused halfway through."""
    import scheduler.client

    monkeypatch.setenv("SCHEDULER_GRACE_WINDOW_S", "3")
    checking = scheduler.client.check_task

    def slow_check(task, **settings):
        checking(task, **settings)
        time.sleep(1.5)  # two lines: the window has passed before anything is sent

    monkeypatch.setattr(scheduler.client, "check_task", slow_check)
    a_moment_ago = int(time.time() * 1000) - 500
    lines = [{"ordering_id": oid, "at": a_moment_ago} for oid in ("o", "p")]
    path = write_lines(tmp_path / "t.jsonl", lines)
    result = run("enqueue-many", str(path))
    assert result.exit_code == 0, result.output
    assert "enqueued 2 task(s)" in result.output

    # The window itself is unchanged: a line already past it when checked is refused.
    late = write_lines(tmp_path / "late.jsonl", [{"ordering_id": "o", "at": a_moment_ago - 5000}])
    result = run("enqueue-many", str(late))
    assert result.exit_code != 0
    assert "nothing was sent" in result.output and "grace window" in result.output
