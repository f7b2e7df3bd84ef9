"""RoutingExecutor, build_executor and JobRegistry: which code a task may run."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.errors import TaskDataError, UnknownExecutorError
from scheduler.executors.abc import ExecutionContext, noop_executor
from scheduler.executors.command import CommandExecutor
from scheduler.executors.registry import JobRegistry, RoutingExecutor, build_executor
from scheduler.model import Task
from tests.executors.conftest import context_for, make_task


class Recorder:
    def __init__(self) -> None:
        self.ran: list[Task] = []
        self.validated: list[Task] = []

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        self.ran.append(task)

    def validate(self, task: Task) -> None:
        if task.data.get("bad"):
            raise TaskDataError("bad task")
        self.validated.append(task)


def test_tasks_go_to_the_executor_their_data_names_else_to_the_default() -> None:
    spark, command = Recorder(), Recorder()
    router = RoutingExecutor({"spark": spark, "command": command}, default="spark")
    first, second = make_task({}), make_task({"executor": "command"})

    router(first, context_for(first))
    router(second, context_for(second))

    assert spark.ran == [first]
    assert command.ran == [second]


def test_an_unknown_executor_is_refused_listing_the_known_ones() -> None:
    router = RoutingExecutor({"spark": Recorder(), "command": Recorder()}, default="spark")
    task = make_task({"executor": "sprak"})

    with pytest.raises(UnknownExecutorError, match=r"'sprak'.*known executors: command, spark"):
        router.validate(task)
    with pytest.raises(UnknownExecutorError, match="sprak"):
        router(task, context_for(task))


@pytest.mark.parametrize(
    ("route", "setting"),
    [("schedules", "programs_file"), ("workflow", "programs_file"), ("batch", "batch_file")],
)
def test_a_route_that_a_setting_adds_names_the_setting_and_the_retry(
    route: str, setting: str
) -> None:
    """A schedule's change sent to a fleet whose workers have no programs file: the task fails
    saying what to set, and how to run it again once set."""
    router = RoutingExecutor({"command": Recorder()}, default="command")
    task = make_task({"executor": route})

    with pytest.raises(UnknownExecutorError) as refused:
        router(task, context_for(task))
    said = str(refused.value)
    assert said.startswith(f"executor {route!r} runs only on workers with {setting}")
    assert "(it has command)" in said
    assert said.endswith("then `scheduler tasks retry` runs this task again")


def test_validate_delegates_to_the_route_when_it_can_validate() -> None:
    command = Recorder()
    router = RoutingExecutor({"command": command, "noop": noop_executor}, default="noop")

    router.validate(make_task({}))  # the noop executor has no validate: accepted
    router.validate(ok := make_task({"executor": "command"}))
    with pytest.raises(TaskDataError, match="bad task"):
        router.validate(make_task({"executor": "command", "bad": True}))
    assert command.validated == [ok]


def test_build_executor_knows_the_built_ins_and_dotted_paths(tmp_path: Path) -> None:
    assert build_executor("noop") is noop_executor
    assert isinstance(build_executor("command", log_dir=str(tmp_path)), CommandExecutor)
    assert build_executor("scheduler.executors.abc:noop_executor") is noop_executor
    built = build_executor("scheduler.executors.command:CommandExecutor", log_dir=str(tmp_path))
    assert isinstance(built, CommandExecutor)
    with pytest.raises(UnknownExecutorError, match="noop, spark, spark-submit, command"):
        build_executor("sparky")
    with pytest.raises(UnknownExecutorError, match="cannot load"):
        build_executor("scheduler.executors.abc:nothing_here")


def test_jobs_are_imported_by_name_only_under_allowed_prefixes() -> None:
    registry = JobRegistry(allowed_prefixes=["scheduler.examples"])
    from scheduler.examples.clicks.jobs import rollup_day

    assert registry.resolve("scheduler.examples.clicks.jobs:rollup_day") is rollup_day
    with pytest.raises(
        UnknownExecutorError, match=r"'os:system'.*importable by name: scheduler\.examples"
    ):
        registry.resolve("os:system")
    with pytest.raises(UnknownExecutorError, match="has no function 'nope'"):
        registry.resolve("scheduler.examples.clicks.jobs:nope")
    # A prefix is a package boundary, not a string prefix.
    with pytest.raises(UnknownExecutorError):
        registry.resolve("scheduler.examples_evil:run")


def test_validate_names_the_job_and_lists_the_registered_ones() -> None:
    registry = JobRegistry({"reports:daily": lambda spark, context: None})
    registry.register("reports:hourly", lambda spark, context: None)

    with pytest.raises(
        UnknownExecutorError,
        match=r"'reports:weekly'.*registered jobs: reports:daily, reports:hourly",
    ):
        registry.validate(make_task({"job": "reports:weekly"}))
    with pytest.raises(TaskDataError, match="'args' must be a mapping"):
        registry.validate(make_task({"job": "reports:daily", "args": [1, 2]}))
    registry.validate(make_task({"job": "reports:daily", "args": {"day": "2026-11-21"}}))


def test_a_task_with_empty_data_takes_the_empty_route_and_others_the_default() -> None:
    spark, noop = Recorder(), Recorder()
    router = RoutingExecutor({"spark": spark, "noop": noop}, default="spark", when_empty="noop")
    empty, named = make_task({}), make_task({"job": "j"})

    router(empty, context_for(empty))
    router(named, context_for(named))
    assert (noop.ran, spark.ran) == ([empty], [named])


def test_a_task_refused_by_the_default_route_is_told_it_may_name_another_executor() -> None:
    router = RoutingExecutor({"spark": Recorder(), "command": Recorder()}, default="spark")
    with pytest.raises(
        TaskDataError, match=r"bad task; .*put \"executor\" in its data \(command\)"
    ):
        router.validate(make_task({"bad": True}))
    with pytest.raises(TaskDataError, match=r"^bad task$"):  # it named one: its own error alone
        router.validate(make_task({"executor": "command", "bad": True}))


def test_an_unknown_job_names_the_setting_and_a_value_of_it_that_allows_the_job() -> None:
    registry = JobRegistry(
        allowed_prefixes=["scheduler.examples"], prefixes_setting="SCHEDULER_SPARK_JOB_MODULES"
    )
    with pytest.raises(
        UnknownExecutorError, match=r"set SCHEDULER_SPARK_JOB_MODULES=scheduler\.examples,my\.jobs "
    ):
        registry.validate(make_task({"job": "my.jobs:daily"}))


def test_an_allowed_job_whose_module_is_missing_says_to_install_it() -> None:
    registry = JobRegistry(allowed_prefixes=["my"])
    with pytest.raises(
        UnknownExecutorError, match=r"importing my\.jobs failed .*install the package"
    ):
        registry.resolve("my.jobs:daily")
    with pytest.raises(UnknownExecutorError, match=r"is not a 'package\.module:function' name"):
        registry.resolve("daily")
