"""Runs a command (an argv list, never a shell) for a task: the batch jobs' executor (seed 004).

Task data::

    {"argv": ["/usr/bin/prog", "--hour", "{{scheduled_hour}}"],
     "vars": {"table": "clicks"},            # optional, values for {{table}}
     "stdout": "logs/{{table}}/{{partition}}.out",   # optional, relative to log_dir
     "stderr": "logs/{{table}}/{{partition}}.err",   # optional (may equal stdout)
     "cwd": "/data", "env": {"K": "V"}, "timeout_s": 600}

Why argv only: a shell would turn every templated value into a possible injection. Why a process
group: cancelling must also stop what the command started (a JVM under a wrapper script).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import IO, Any

from scheduler.errors import SchedulerError, TaskDataError, TaskTimeoutError
from scheduler.executors.abc import ExecutionContext
from scheduler.executors.left_running import RUNNING_DIR, note_running
from scheduler.model import Task

__all__ = [
    "CommandExecutor",
    "CommandFailedError",
    "TemplateError",
    "render",
    "run_process",
    "safe_key",
    "template_vars",
]

#: Seconds between SIGTERM and SIGKILL when a command is cancelled.
KILL_GRACE_S = 5.0

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")


class CommandFailedError(SchedulerError):
    """A command could not start, or exited with a non-zero code."""


class TemplateError(TaskDataError):
    """A template names a variable that neither the task's vars nor the built-ins define."""


def safe_key(task: Task) -> str:
    """A file-name-safe, still readable, form of the task key, e.g. `clicks_2026_1795..._run`.

    Only `[A-Za-z0-9._=-]` survive; a short hash of the real key keeps distinct keys distinct.
    """
    import hashlib

    key = task.key
    readable = "_".join(
        _UNSAFE.sub("-", part).strip(".-") or "-"
        for part in (key.ordering_id, str(key.scheduled_ms), key.uniqueness_key)
    )
    digest = hashlib.sha1(str(key).encode("utf-8")).hexdigest()[:8]
    return f"{readable[:150]}_{digest}"


def template_vars(task: Task, attempt: int) -> dict[str, str]:
    """Built-in template variables, overlaid with the task's `vars` (which win)."""
    moment = task.scheduled_time
    builtins = {
        "ordering_id": task.ordering_id,
        "uniqueness_key": task.uniqueness_key,
        "task_key": safe_key(task),
        "attempt": str(attempt),
        "scheduled_ms": str(task.scheduled_ms),
        "scheduled_iso": moment.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "scheduled_hour": moment.strftime("%Y%m%d%H"),
        "scheduled_day": moment.strftime("%Y%m%d"),
        # The seed's [[partition]]: "yyyy-MM-dd HH:mm:ss". Batch jobs may pass their own in vars.
        "partition": moment.strftime("%Y-%m-%d %H:%M:%S"),
    }
    extra = task.data.get("vars", {})
    if not isinstance(extra, Mapping):
        raise TaskDataError(f"task {task.key}: 'vars' must be a mapping, got {type(extra)}")
    for name, value in extra.items():
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise TaskDataError(
                f"task {task.key}: template variable {name!r} must be a string or a number, "
                f"got {type(value).__name__}"
            )
    return {**builtins, **{str(k): str(v) for k, v in extra.items()}}


def render(template: str, variables: Mapping[str, str]) -> str:
    """Replace every `{{name}}`; an unknown name is an error, never an empty string."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            raise TemplateError(
                f"unknown template variable {{{{{name}}}}} in {template!r}; known variables: "
                f"{', '.join(sorted(variables))} (add it to the task's 'vars')"
            )
        return variables[name]

    return _PLACEHOLDER.sub(substitute, template)


def tail(path: Path, lines: int = 20) -> str:
    """The last `lines` lines of a (log) file, for error messages; empty if unreadable."""
    try:
        with path.open("rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - 16_384))
            text = file.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_process(
    argv: Sequence[str],
    context: ExecutionContext,
    *,
    stdout: Path,
    stderr: Path,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    running: Path | None = None,
) -> int:
    """Run `argv` in its own process group, output to files; return its exit code.

    The output file (`stdout`) and the exit code are noted on `context` for the attempt's
    record. Cancelling `context` sends SIGTERM to the group, then SIGKILL after KILL_GRACE_S,
    and makes this raise `TaskCancelledError`; `timeout_s` does the same and raises
    `TaskTimeoutError`. A process that cannot start raises `CommandFailedError`, its reason
    written to `stderr`. While it runs it is noted in the directory `running`, if given, so
    that a worker starting after this one died stops it (`left_running`).
    """
    context.raise_if_cancelled()
    context.log_path = str(stdout)
    stdout.parent.mkdir(parents=True, exist_ok=True)
    stderr.parent.mkdir(parents=True, exist_ok=True)
    with ExitStack() as files:
        out: IO[bytes] = files.enter_context(stdout.open("wb"))
        err = (
            out if stderr.resolve() == stdout.resolve() else files.enter_context(stderr.open("wb"))
        )
        try:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as error:
            reason = f"cannot start {list(argv)!r}: {error}\n"
            err.write(reason.encode("utf-8"))
            raise CommandFailedError(
                f"task {context.key}: {reason.strip()} (written to {stderr})"
            ) from error
        forget = note_running(running, process.pid, str(context.key)) if running else None
        reaped = threading.Event()
        # Once the leader is reaped its pid may be reused: never signal that group again.
        context.on_cancel(lambda: None if reaped.is_set() else _terminate_group(process))
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _terminate_group(process)
            process.wait()
            raise TaskTimeoutError(
                f"task {context.key}: {argv[0]} ran longer than timeout_s={timeout_s} and was "
                f"killed; see {stderr}"
            ) from None
        finally:
            reaped.set()
            if forget is not None:
                forget()
    context.exit_code = code
    context.raise_if_cancelled()
    return code


def _terminate_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group now and SIGKILL it after KILL_GRACE_S if the leader lives on."""
    _signal_group(process, signal.SIGTERM)

    def kill_later() -> None:
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=KILL_GRACE_S)
        # Children may outlive a leader that obeyed SIGTERM; the group goes either way.
        _signal_group(process, signal.SIGKILL)

    threading.Thread(target=kill_later, name=f"kill {process.pid}", daemon=True).start()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


class CommandExecutor:
    """Runs `{"argv": [...], ...}` tasks as child processes; see the module docstring."""

    def __init__(self, *, log_dir: str, env: Mapping[str, str] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.env = dict(env or {})

    def validate(self, task: Task) -> None:
        """Enqueue-time check: argv is a non-empty list of strings and every template renders."""
        self._prepare(task, attempt=1)

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        argv, stdout, stderr, options = self._prepare(task, context.attempt)
        env = {
            **os.environ,
            **self.env,
            **options["env"],
            "SCHEDULER_TASK_KEY": str(task.key),
            "SCHEDULER_LOGICAL_TIME": task.scheduled_time.isoformat(),
            "SCHEDULER_ATTEMPT": str(context.attempt),
        }
        code = run_process(
            argv,
            context,
            stdout=stdout,
            stderr=stderr,
            cwd=options["cwd"],
            env=env,
            timeout_s=options["timeout_s"],
            running=self.log_dir / RUNNING_DIR,
        )
        if code != 0:
            last = tail(stderr, 10)
            raise CommandFailedError(
                f"task {task.key}: {argv[0]} exited with code {code}; "
                + (f"stderr in {stderr}:\n{last}" if last else f"stderr ({stderr}) is empty")
            )

    def _prepare(self, task: Task, attempt: int) -> tuple[list[str], Path, Path, dict[str, Any]]:
        data = task.data
        argv = data.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise TaskDataError(
                f"task {task.key}: 'argv' must be a non-empty list of strings, e.g. "
                '["/bin/echo", "{{partition}}"]; commands never run through a shell'
            )
        variables = template_vars(task, attempt)
        rendered = [render(arg, variables) for arg in argv]
        default = f"{safe_key(task)}/attempt-{attempt}"
        stdout = self._path(render(str(data.get("stdout", default + ".out")), variables))
        stderr = self._path(render(str(data.get("stderr", default + ".err")), variables))
        env = data.get("env", {})
        if not isinstance(env, Mapping) or not all(isinstance(v, str) for v in env.values()):
            raise TaskDataError(f"task {task.key}: 'env' must map names to strings")
        timeout = data.get("timeout_s")
        if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
            raise TaskDataError(f"task {task.key}: 'timeout_s' must be a positive number")
        cwd = data.get("cwd")
        options = {
            "env": {str(k): v for k, v in env.items()},
            "timeout_s": timeout,
            "cwd": render(cwd, variables) if isinstance(cwd, str) else None,
        }
        return rendered, stdout, stderr, options

    def _path(self, rendered: str) -> Path:
        path = Path(rendered)
        return path if path.is_absolute() else self.log_dir / path
