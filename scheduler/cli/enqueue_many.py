"""`scheduler enqueue-many`: schedule the tasks of a JSON Lines file, every line checked first.

A backfill or a migration comes as a file, and a file with a bad line in its middle should send
nothing rather than half of itself: so the file is read twice, once to check every line (no
connection needed) and once to send, in chunks through `schedule_tasks`, with a bounded number
of chunks unacknowledged. Nothing is held but those chunks, whatever the file's size; standard
input is copied to a temporary file so that it can be read twice too.

A line without "key" gets one derived from its content, so that sending a file again after a
failure replaces the tasks already written instead of adding them twice.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import click

from scheduler.cli.context import CliState, pass_state
from scheduler.cli.enqueue import connected_client, executor_check
from scheduler.cli.keys import due_in, parse_time
from scheduler.errors import BackendUnavailableError, SchedulerError
from scheduler.model import Task

FIELDS = ("ordering_id", "at", "in", "key", "data")
CHUNK = 1000
"""Tasks per `schedule_tasks` call."""
CHUNKS_IN_FLIGHT = 16
"""Chunks sent but not yet acknowledged, at most: what bounds the command's memory."""
ERRORS_SHOWN = 10
ACK_TIMEOUT_S = 120.0
_KEY_NAMESPACE = uuid.UUID("6f1d3c2a-5b7e-4c1f-9a8d-2e4b6c8d0f13")
"""Namespace of the keys derived from a line's content (uuid5)."""


class LineError(ValueError):
    """A line that is not a task."""


@click.command("enqueue-many")
@click.argument(
    "file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@click.option("--check", "check_only", is_flag=True, help="Check every line; send nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@pass_state
def enqueue_many(state: CliState, file: Path, check_only: bool, as_json: bool) -> None:
    """Schedule the tasks of a JSON Lines FILE (- for stdin), one task per line.

    \b
    Each line is a JSON object; only "ordering_id" is required:
      {"ordering_id": "orders-42", "at": "2027-01-31T14:00:00Z", "data": {"executor": "noop"}}
      {"ordering_id": "orders-43", "in": "5m", "key": "nightly"}

    "at" is ISO 8601 with a time zone or epoch milliseconds, "in" a duration from when the line
    is sent (30s, 5m, 1h30m); with neither, the task is due when it is sent. "key" tells tasks
    of one ordering id at the same time apart; without it the key is derived from the line's
    content, so sending a file again replaces its tasks instead of adding them twice (for lines
    with "at": "in" moves with the clock). Blank lines are skipped.

    Every line is checked before anything is sent: a file with a bad line sends nothing, and the
    error names the line. A line's time is judged by that check: one inside the grace window then
    is sent even if a large file reaches it later. The command returns once every task is
    durable.
    """
    from scheduler.client import check_task

    settings = state.settings()
    validate = executor_check(state, settings)

    def check(task: Task) -> None:
        check_task(
            task,
            grace_window_s=settings.grace_window_s,
            max_data_bytes=settings.max_data_bytes,
            validate=validate,
        )

    started = time.monotonic()
    with ExitStack() as stack:
        source = _readable(file, stack)
        count = _check_every_line(source, file, check)
        if check_only or not count:
            _report(as_json, file, count, sent=False, seconds=time.monotonic() - started)
            return
        source.seek(0)
        _send(settings, _tasks(source), count, validate, checked_since=started)
    _report(as_json, file, count, sent=True, seconds=time.monotonic() - started)


def _readable(file: Path, stack: ExitStack) -> IO[bytes]:
    """The file, or standard input copied to a temporary file (read twice either way); bytes,
    so that a line that is not UTF-8 is one bad line rather than the end of the reading."""
    if str(file) != "-":
        return stack.enter_context(file.open("rb"))
    copy = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
    shutil.copyfileobj(sys.stdin.buffer, copy)
    copy.seek(0)
    return copy


def _check_every_line(source: IO[bytes], file: Path, check: Callable[[Task], None]) -> int:
    """How many tasks the file holds; or the error naming its first bad lines."""
    count, bad = 0, 0
    shown: list[str] = []
    for number, text in _lines(source):
        try:
            task = parse_line(text, datetime.now(UTC))
            check(task)
        except (LineError, SchedulerError, click.BadParameter) as error:
            bad += 1
            if len(shown) < ERRORS_SHOWN:
                message = error.format_message() if isinstance(error, click.BadParameter) else error
                shown.append(f"  line {number}: {message}")
            continue
        count += 1
    if bad:
        name = _name(file)
        more = [f"  ... and {bad - len(shown)} more"] if bad > len(shown) else []
        heading = f"{name} has {bad} bad line(s); nothing was sent. Fix them and run again:"
        raise SchedulerError("\n".join([heading, *shown, *more]))
    return count


def _lines(source: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    for number, line in enumerate(source, start=1):
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")  # the BOM some editors write
        if line.strip():
            yield number, line


def _tasks(source: IO[bytes]) -> Iterator[Task]:
    """The file's tasks, "now" and "in" counted from when each is read to be sent: a file that
    takes longer than the grace window to check must not turn its due-now tasks into tasks in
    the past."""
    for _, text in _lines(source):
        yield parse_line(text, datetime.now(UTC))


def parse_line(raw: str | bytes, now: datetime) -> Task:
    """The task of one line, or a `LineError` saying what is wrong with it."""
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as error:
        raise LineError(f"not UTF-8 text ({error})") from None
    try:
        line: Any = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise LineError(f"not a JSON object ({error})") from None
    if not isinstance(line, dict):
        raise LineError(f"not a JSON object (a {type(line).__name__})")
    unknown = sorted(set(line) - set(FIELDS))
    if unknown:
        raise LineError(f"unknown field(s) {unknown}; a line may have {list(FIELDS)}")
    ordering_id = line.get("ordering_id")
    if not isinstance(ordering_id, str):
        raise LineError('"ordering_id" is missing or not a string')
    data = line.get("data", {})
    if not isinstance(data, dict):
        raise LineError(f'"data" must be a JSON object, got {type(data).__name__}')
    key = line.get("key")
    if key is None:
        canonical = json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        key = str(uuid.uuid5(_KEY_NAMESPACE, canonical))
    elif not isinstance(key, str):
        raise LineError('"key" must be a string')
    return Task(ordering_id, _due(line, now), key, data)


def _due(line: dict[str, Any], now: datetime) -> datetime:
    at, delay = line.get("at"), line.get("in")
    if at is not None and delay is not None:
        raise LineError('give "at" or "in", not both')
    if at is not None:
        if isinstance(at, bool) or not isinstance(at, str | int):
            raise LineError('"at" must be a string (ISO 8601) or epoch milliseconds')
        return parse_time(str(at), '"at"')
    if delay is not None:
        if not isinstance(delay, str):
            raise LineError('"in" must be a duration string such as "5m"')
        return due_in(delay, '"in"', now)
    return now


def _send(
    settings: Any,
    tasks: Iterator[Task],
    count: int,
    validate: Callable[[Task], None] | None,
    *,
    checked_since: float,
) -> None:
    """Send `tasks` in chunks, at most `CHUNKS_IN_FLIGHT` unacknowledged; wait for them all."""
    with connected_client(settings, validate) as (client, _), _progress(count) as advance:
        _send_chunks(client, tasks, count, advance, checked_since=checked_since)


def _send_chunks(
    client: Any,
    tasks: Iterator[Task],
    count: int,
    advance: Callable[[int], None],
    *,
    checked_since: float,
) -> None:
    """`checked_since`: when the check of the file began (`time.monotonic()`). A line's time is
    judged by that check: a line with "at" a few seconds in the past, inside the grace window
    when checked, is still sent when a large file reaches it later (the client's window grows
    by the time since the check began), instead of failing the command halfway through."""
    in_flight: deque[tuple[int, Future[int]]] = deque()
    acknowledged = 0
    grace_ms = client.grace_window_ms

    def send(chunk: list[Task]) -> None:
        client.grace_window_ms = grace_ms + int((time.monotonic() - checked_since) * 1000) + 1
        in_flight.append((len(chunk), client.schedule_tasks(chunk)))

    def wait_oldest() -> None:
        nonlocal acknowledged
        size, future = in_flight.popleft()
        try:
            future.result(ACK_TIMEOUT_S)
        except Exception as error:
            # Count what made it among the chunks still out, then say so.
            done, _ = wait([other for _, other in in_flight], timeout=ACK_TIMEOUT_S)
            acknowledged += sum(f.result() for f in done if f.exception() is None)
            raise _stopped(error, acknowledged, count) from error
        acknowledged += size
        advance(size)

    chunk: list[Task] = []
    for task in tasks:
        chunk.append(task)
        if len(chunk) == CHUNK:
            if len(in_flight) >= CHUNKS_IN_FLIGHT:
                wait_oldest()
            send(chunk)
            chunk = []
    if chunk:
        send(chunk)
    while in_flight:
        wait_oldest()


def _stopped(error: BaseException, acknowledged: int, count: int) -> SchedulerError:
    unreachable = isinstance(error, BackendUnavailableError | TimeoutError)
    kind = BackendUnavailableError if unreachable else SchedulerError
    reason = str(error) or f"no acknowledgement within {ACK_TIMEOUT_S:g} s"
    return kind(
        f"sending stopped: {reason}. {acknowledged:,} of {count:,} tasks were acknowledged "
        "before that (others may have been written too). Running the command again is safe "
        'for lines with "at": their tasks replace themselves'
    )


@contextmanager
def _progress(count: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for large files at a terminal; otherwise nothing."""
    if count <= CHUNK or not sys.stderr.isatty():
        yield lambda size: None
        return
    with click.progressbar(length=count, label="enqueuing", file=sys.stderr) as bar:
        yield bar.update


def _name(file: Path) -> str:
    return "standard input" if str(file) == "-" else str(file)


def _report(as_json: bool, file: Path, count: int, *, sent: bool, seconds: float) -> None:
    name = _name(file)
    if as_json:
        from scheduler.cli.output import echo_json

        echo_json({"file": name, "tasks": count, "sent": sent, "seconds": round(seconds, 3)})
    elif not count:
        click.echo(f"no tasks in {name}; nothing sent")
    elif sent:
        click.echo(f"enqueued {count:,} task(s) from {name} in {seconds:.1f} s")
    else:
        click.echo(f"{count:,} task(s) in {name} checked; nothing sent (--check)")
