"""CommandExecutor: argv only, templating, output files, start failures, timeouts, cancellation."""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduler.errors import TaskCancelledError, TaskDataError, TaskTimeoutError
from scheduler.executors.command import (
    CommandExecutor,
    CommandFailedError,
    TemplateError,
    render,
    template_vars,
)
from scheduler.model import Task
from tests.executors.conftest import context_for, make_task

PY = sys.executable


def hourly_task(data: dict[str, object]) -> Task:
    return Task("batch:clicks", datetime(2026, 11, 21, 13, tzinfo=UTC), "run", data)


def test_templates_substitute_builtins_and_vars_and_vars_win() -> None:
    task = hourly_task({"vars": {"table": "clicks", "partition": "p13"}})
    variables = template_vars(task, attempt=2)

    assert render("{{table}}/{{ scheduled_hour }}/{{attempt}}", variables) == "clicks/2026112113/2"
    assert (
        render("{{scheduled_iso}} {{scheduled_day}}", variables) == "2026-11-21T13:00:00Z 20261121"
    )
    assert render("{{ordering_id}}:{{uniqueness_key}}", variables) == "batch:clicks:run"
    assert render("{{partition}}", variables) == "p13"
    assert render("{{partition}}", template_vars(hourly_task({}), 1)) == "2026-11-21 13:00:00"


def test_an_unknown_template_variable_is_a_clear_failure(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match=r"\{\{tabel\}\}.*known variables: .*attempt"):
        render("out/{{tabel}}", template_vars(hourly_task({}), 1))
    task = hourly_task({"argv": ["/bin/echo", "{{tabel}}"]})
    with pytest.raises(TemplateError, match="tabel"):
        CommandExecutor(log_dir=str(tmp_path)).validate(task)


def test_argv_must_be_a_list_because_nothing_runs_through_a_shell(tmp_path: Path) -> None:
    with pytest.raises(TaskDataError, match="never run through a shell"):
        CommandExecutor(log_dir=str(tmp_path)).validate(hourly_task({"argv": "echo hi; rm -rf /"}))


def test_a_command_writes_its_output_to_the_templated_files(tmp_path: Path) -> None:
    script = (
        "import os, sys; print(sys.argv[1], os.environ['SCHEDULER_ATTEMPT']); "
        "print('warn', file=sys.stderr)"
    )
    task = hourly_task(
        {
            "argv": [PY, "-c", script, "{{partition}}; $(not a shell)"],
            "stdout": "{{table}}/{{scheduled_hour}}.out",
            "stderr": "{{table}}/{{scheduled_hour}}.err",
            "vars": {"table": "clicks"},
        }
    )
    CommandExecutor(log_dir=str(tmp_path))(task, context_for(task, attempt=3))

    assert (
        tmp_path / "clicks/2026112113.out"
    ).read_text() == "2026-11-21 13:00:00; $(not a shell) 3\n"
    assert (tmp_path / "clicks/2026112113.err").read_text() == "warn\n"


def test_stdout_and_stderr_may_share_one_file(tmp_path: Path) -> None:
    script = "import sys; print('out', flush=True); print('err', file=sys.stderr)"
    task = hourly_task({"argv": [PY, "-c", script], "stdout": "log.txt", "stderr": "log.txt"})
    CommandExecutor(log_dir=str(tmp_path))(task, context_for(task))

    assert (tmp_path / "log.txt").read_text() == "out\nerr\n"


def test_a_non_zero_exit_fails_with_the_code_and_the_end_of_stderr(tmp_path: Path) -> None:
    script = "import sys; print('disk full', file=sys.stderr); sys.exit(3)"
    task = hourly_task({"argv": [PY, "-c", script], "stderr": "e.txt"})
    with pytest.raises(CommandFailedError, match=r"(?s)exited with code 3.*e\.txt.*disk full"):
        CommandExecutor(log_dir=str(tmp_path))(task, context_for(task))


def test_a_non_zero_exit_with_nothing_on_stderr_says_so(tmp_path: Path) -> None:
    task = hourly_task({"argv": [PY, "-c", "raise SystemExit(3)"], "stderr": "e.txt"})
    with pytest.raises(CommandFailedError) as failed:
        CommandExecutor(log_dir=str(tmp_path))(task, context_for(task))
    assert str(failed.value).endswith(f"exited with code 3; stderr ({tmp_path / 'e.txt'}) is empty")


def test_a_missing_program_fails_and_writes_why_to_the_stderr_file(tmp_path: Path) -> None:
    task = hourly_task({"argv": ["/no/such/program", "x"], "stderr": "{{scheduled_hour}}.err"})
    with pytest.raises(CommandFailedError, match="cannot start"):
        CommandExecutor(log_dir=str(tmp_path))(task, context_for(task))
    reason = (tmp_path / "2026112113.err").read_text()
    assert "/no/such/program" in reason
    assert "No such file or directory" in reason


def test_a_program_that_is_not_executable_fails_and_writes_why(tmp_path: Path) -> None:
    program = tmp_path / "not-executable.sh"
    program.write_text("#!/bin/sh\necho hi\n")
    program.chmod(0o644)
    task = hourly_task({"argv": [str(program)], "stderr": "err.txt"})
    with pytest.raises(CommandFailedError, match="Permission denied"):
        CommandExecutor(log_dir=str(tmp_path))(task, context_for(task))
    assert "Permission denied" in (tmp_path / "err.txt").read_text()


def test_timeout_s_kills_the_command(tmp_path: Path) -> None:
    task = make_task({"argv": [PY, "-c", "import time; time.sleep(60)"], "timeout_s": 0.5})
    started = time.monotonic()
    with pytest.raises(TaskTimeoutError, match=r"timeout_s=0\.5"):
        CommandExecutor(log_dir=str(tmp_path))(task, context_for(task))
    assert time.monotonic() - started < 10


def test_cancelling_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    task = make_task({"argv": [PY, "-c", script]})
    context = context_for(task)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(CommandExecutor(log_dir=str(tmp_path)), task, context)
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the command never started its child"
            time.sleep(0.05)
        context.cancel("operator cancelled")
        with pytest.raises(TaskCancelledError, match="operator cancelled"):
            future.result(timeout=15)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while is_alive(child):
        assert time.monotonic() < deadline, f"grandchild {child} survived the cancel"
        time.sleep(0.05)


def is_alive(pid: int) -> bool:
    """True unless `pid` is gone or a zombie (killed, waiting for a reaper we do not control)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        return os.path.exists(f"/proc/{pid}")
