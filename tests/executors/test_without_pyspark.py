"""pyspark is the `scheduler[spark]` extra: without it, what needs Spark is refused with an error
naming the extra, and everything else (the routing executor, commands) works as before.

These tests make this process believe pyspark is missing (`pyspark_installed` answers False, as it
does when the package is absent); tests/cli/test_without_pyspark.py runs the real CLI with the
package made unimportable."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.errors import ConfigurationError, ExecutorUnavailableError, TaskRejected
from scheduler.executors import spark
from scheduler.executors.spark import SparkExecutor, require_java
from scheduler.executors.spark_submit import SparkSubmitExecutor
from scheduler.runtime import build_executor
from scheduler.settings import Settings
from tests.executors.conftest import context_for, make_task

SPARK_JOB = {"job": "scheduler.examples.clicks.jobs:rollup_day", "args": {}}


@pytest.fixture
def no_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark, "pyspark_installed", lambda: False)


def test_pyspark_is_found_here_without_being_imported() -> None:
    assert spark.pyspark_installed()


@pytest.mark.usefixtures("no_pyspark")
def test_a_spark_task_is_refused_at_validation_naming_the_job_and_the_extra() -> None:
    task = make_task(SPARK_JOB)

    with pytest.raises(ExecutorUnavailableError) as refused:
        SparkExecutor().validate(task)

    message = str(refused.value)
    assert "pip install 'scheduler[spark]'" in message
    assert "'scheduler.examples.clicks.jobs:rollup_day'" in message
    assert str(task.key) in message
    assert isinstance(refused.value, TaskRejected)  # schedule_task refuses it, writes nothing


@pytest.mark.usefixtures("no_pyspark")
def test_a_spark_task_that_reaches_a_worker_without_pyspark_fails_with_the_same_error() -> None:
    task = make_task(SPARK_JOB)

    with pytest.raises(ExecutorUnavailableError, match=r"scheduler\[spark\]"):
        SparkExecutor()(task, context_for(task))


@pytest.mark.usefixtures("no_pyspark")
def test_spark_submit_builds_without_pyspark_and_refuses_only_tasks_that_need_its_script(
    tmp_path: Path,
) -> None:
    task = make_task({"application": "jobs/report.py"})
    bundled = SparkSubmitExecutor(log_dir=str(tmp_path))
    own = SparkSubmitExecutor(spark_submit="/opt/spark/bin/spark-submit", log_dir=str(tmp_path))

    with pytest.raises(ExecutorUnavailableError, match=r"spark-submit.*scheduler\[spark\]"):
        bundled.validate(task)
    own.validate(task)
    assert own.argv(task)[0] == "/opt/spark/bin/spark-submit"


@pytest.mark.usefixtures("no_pyspark")
@pytest.mark.parametrize("name", ["spark", "spark-submit"])
def test_a_worker_set_to_a_spark_executor_is_refused_at_start_naming_the_setting(
    name: str, tmp_path: Path
) -> None:
    settings = Settings(executor=name, data_dir=str(tmp_path))

    with pytest.raises(ConfigurationError) as refused:
        build_executor(settings)

    message = str(refused.value)
    assert f"SCHEDULER_EXECUTOR={name!r}" in message
    assert "pip install 'scheduler[spark]'" in message
    assert "auto, command, noop" in message


@pytest.mark.usefixtures("no_pyspark")
def test_the_auto_executor_builds_without_pyspark_and_runs_commands(tmp_path: Path) -> None:
    executor = build_executor(Settings(executor="auto", data_dir=str(tmp_path)))
    command = make_task(
        {"executor": "command", "argv": ["/bin/sh", "-c", "echo ran > out"], "cwd": str(tmp_path)}
    )

    executor.validate(command)  # type: ignore[attr-defined]
    executor(command, context_for(command))

    assert (tmp_path / "out").read_text() == "ran\n"
    with pytest.raises(ExecutorUnavailableError, match=r"scheduler\[spark\]"):
        executor.validate(make_task(SPARK_JOB))  # type: ignore[attr-defined]


def test_without_java_a_spark_session_is_refused_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))

    with pytest.raises(ConfigurationError) as refused:
        require_java()

    message = str(refused.value)
    assert f"JAVA_HOME={str(tmp_path / 'no-jdk')!r} has no bin/java" in message
    assert "openjdk-17-jre-headless" in message


def test_java_on_path_or_in_java_home_is_enough(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    require_java()
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(java.parent))
    require_java()
