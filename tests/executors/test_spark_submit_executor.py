"""SparkSubmitExecutor: one spark-submit process per attempt, judged by its exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.executors.command import CommandFailedError
from scheduler.executors.spark_submit import SparkSubmitExecutor
from tests.executors.conftest import context_for, make_task

# Exits without starting a SparkContext: the test checks the executor, not a second JVM's speed.
APPLICATION = """\
import os, sys
print("args", sys.argv[1:], "key", os.environ["SCHEDULER_TASK_KEY"])
if sys.argv[1] == "fail":
    print("the input is missing", file=sys.stderr)
    sys.exit(1)
"""


def executor(tmp_path: Path) -> SparkSubmitExecutor:
    return SparkSubmitExecutor(
        master="local[1]", conf={"spark.ui.enabled": "false"}, log_dir=str(tmp_path / "logs")
    )


def test_the_command_line_is_an_argv_with_merged_conf(tmp_path: Path) -> None:
    task = make_task(
        {
            "application": "jobs/report.py",
            "args": ["--day", "2026-11-21; rm -rf /"],
            "conf": {"spark.executor.memory": "2g"},
        }
    )
    argv = executor(tmp_path).argv(task)

    assert argv[0].endswith("spark-submit")
    assert argv[1:3] == ["--master", "local[1]"]
    assert argv[5:9] == ["--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=2g"]
    assert argv[-3:] == ["jobs/report.py", "--day", "2026-11-21; rm -rf /"]


@pytest.mark.spark
def test_a_python_application_runs_and_logs_to_its_attempt_file(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(APPLICATION)
    task = make_task({"application": str(app), "args": ["ok", "x y"]})
    submit = executor(tmp_path)

    submit(task, context_for(task, attempt=2))

    log = submit.log_path(task, 2)
    assert log.parent.parent == tmp_path / "logs" and log.name == "attempt-2.log"
    assert f"args ['ok', 'x y'] key {task.key}" in log.read_text()


@pytest.mark.spark
def test_exit_code_1_is_a_failure_naming_the_log_and_quoting_its_end(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(APPLICATION)
    task = make_task({"application": str(app), "args": ["fail"]})
    submit = executor(tmp_path)

    with pytest.raises(CommandFailedError) as failure:
        submit(task, context_for(task))
    message = str(failure.value)
    assert "exited with code 1" in message
    assert str(submit.log_path(task, 1)) in message
    assert "the input is missing" in message
