"""Structured logs with the standard library: JSON lines for machines, readable text for people.

Library code only logs (`logging.getLogger(__name__)`, context in `extra={"partition": 3,
"task": str(key)}`); it never configures handlers. The CLI calls `configure_logging` once, so
that embedding applications keep control of their own logging. Both formats carry every `extra`
field, so a log shipper can filter on `partition` or `task` without parsing messages.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

_STANDARD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's copy of the message with terminal colours: not a field
}
"""Attributes every LogRecord has (and uvicorn's `color_message`); anything else on a record
came from `extra`."""

_HANDLER_NAME = "scheduler-cli"


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a caller passed in `extra`."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD_ATTRIBUTES}


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts, level, logger, message, the extra fields, exc if any."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in extra_fields(record).items():
            line.setdefault(name, value)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = record.stack_info
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`2026-01-01T00:00:00.000Z INFO  scheduler.worker: message partition=3 task=...`."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{_timestamp(record)} {record.levelname:<5} {record.name}: {record.getMessage()}"
        extras = extra_fields(record)
        if extras:
            text += " " + " ".join(f"{name}={value}" for name, value in extras.items())
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text


class QuietDependencies(logging.Filter):
    """Dependencies' tracebacks shrink to one line (unless DEBUG): the scheduler reports the
    same failure itself, with the setting to fix, and a driver's reconnect traceback on every
    retry would bury it. The exception's own words are kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not record.name.startswith("scheduler"):
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()} {type(error).__name__}: {error}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


class ExpectedTombstoneWarnings(logging.Filter):
    """Shows as DEBUG the server warnings about tombstones that an operator's listing reads.

    The admin views (`scheduler tasks list`, `group status`) scan whole buckets, deleted rows of
    completed tasks included (docs/cassandra.md, "Tombstones and TTLs"), and Cassandra warns of
    every such read; the driver logs each as a WARNING, one or more per bucket, between the
    command's own output. Installed by the CLI around those reads only: a worker's reads go
    forward from their cursors, so its tombstone warnings stay WARNINGs."""

    LOGGER = "cassandra.protocol"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and "tombstone" in record.getMessage():
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


REPORTED_ACTORS = frozenset(
    {
        "PartitionExecutor",
        "TaskPersistence",
    }
)
"""The partition actors (`scheduler.actors.base.PartitionActor`'s subclasses): the TopicSupervisor
logs their failures itself, as `partition N failed (...)`, naming the partition."""


_REPORTED_FAILURES = tuple(f"Unhandled exception in {actor} (" for actor in REPORTED_ACTORS)
"""How pykka's line for a failed partition actor starts: "... in TaskPersistence (urn:...):"."""


class ReportedActorFailures(logging.Filter):
    """Drops pykka's "Unhandled exception in <actor>" for the partition actors (unless DEBUG): the
    same failure is logged once, with its partition, by the TopicSupervisor. With a store down,
    each of a worker's partitions fails every few seconds, and every failure was said twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.name == "pykka"
            and isinstance(record.msg, str)
            and record.msg.startswith(_REPORTED_FAILURES)
        )


class OncePerMinute(logging.Filter):
    """Lets a line that repeats through once a minute per `key`, with the count held back since
    the last one it let through; lines without a key pass as they come.

    For a dependency that retries by itself and logs every try, for as long as a server is away
    or refuses it: the line must stay visible, not fill the log."""

    EVERY_S = 60.0
    KEPT = 1024
    """Keys remembered before those not seen for a minute are forgotten (a key may name a client
    instance, and a process that makes many clients would keep them all)."""
    HELD_BACK = "({held} more like it before)"
    """What is added to a line let through after some were held back."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._lock = threading.Lock()
        self._shown: dict[str, tuple[float, int]] = {}
        """Per key, when its line was last let through, and how many were held back since."""

    def key(self, record: logging.LogRecord) -> str | None:
        """What makes two lines the same; None for a line to let through as it comes."""
        raise NotImplementedError

    def filter(self, record: logging.LogRecord) -> bool:
        key = self.key(record)
        if key is None:
            return True
        now = self._clock()
        with self._lock:
            shown_at, held = self._shown.get(key, (None, 0))
            if shown_at is not None and now - shown_at < self.EVERY_S:
                self._shown[key] = (shown_at, held + 1)
                return False
            if len(self._shown) >= self.KEPT:
                self._shown = {k: v for k, v in self._shown.items() if now - v[0] < self.EVERY_S}
            self._shown[key] = (now, 0)
        if held:
            record.msg = f"{record.getMessage()} {self.HELD_BACK.format(held=held)}"
            record.args = ()
        return True


class RepeatedReconnectWarnings(OncePerMinute):
    """Shows cassandra-driver's warning about a failed reconnection to a node once a minute per
    node (unless DEBUG), with the count held back. The driver tries a node that is down every
    few seconds and warns of each try, for as long as the node stays down: 720 lines an hour a
    node, while the worker's own lines and its probes' `problem` already say the store is down."""

    LOGGER = "cassandra.pool"
    HELD_BACK = "({held} more such lines held back since the last)"

    def key(self, record: logging.LogRecord) -> str | None:
        if record.name != self.LOGGER or not str(record.msg).startswith(
            "Error attempting to reconnect to"
        ):
            return None
        return str(record.args[0]) if isinstance(record.args, tuple) and record.args else ""


TASKS_LOGGER = "scheduler.tasks"
"""The engine's line per finished task attempt (see `task_level`)."""

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def configure_logging(
    level: str = "INFO",
    fmt: Literal["text", "json"] = "text",
    stream: TextIO | None = None,
    *,
    task_level: str = "INFO",
) -> None:
    """Send the root logger's records to `stream` (stderr) in `fmt`; idempotent. The per-task
    lines (`TASKS_LOGGER`) are written from `task_level` or `level`, the more severe.

    Calling it again replaces the handler it installed before (the CLI configures early with
    the command-line options and again once the settings file and environment are known).
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    if level.upper() != "DEBUG":
        handler.addFilter(QuietDependencies())
        handler.addFilter(ReportedActorFailures())
        handler.addFilter(RepeatedReconnectWarnings())
    root.addHandler(handler)
    root.setLevel(level.upper())
    tasks = max(_LEVELS.index(level.upper()), _LEVELS.index(task_level.upper()))
    logging.getLogger(TASKS_LOGGER).setLevel(_LEVELS[tasks])
    # Chatty dependencies stay at WARNING unless the user asks for DEBUG.
    # pykka logs every exception an actor returns to its caller at INFO; the caller reports it.
    for name in ("py4j", "cassandra", "kazoo", "urllib3", "pykka"):
        logging.getLogger(name).setLevel(logging.DEBUG if level.upper() == "DEBUG" else "WARNING")
