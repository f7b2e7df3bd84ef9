"""Which code may run: executors by name, and PySpark jobs by name.

Both registries refuse unknown names with `UnknownExecutorError` naming what was asked for and what
is known, because the client calls `validate` at enqueue time: a typo should bounce off
`schedule_task`, not sit in the store until it fails at 3 a.m. At run time the same error ends the
attempt (and, with retries exhausted, the task) with that message.

Nothing here imports pyspark, so producers can validate tasks without a JVM.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, cast

from scheduler.errors import TaskDataError, UnknownExecutorError
from scheduler.executors.abc import ExecutionContext, Executor, noop_executor
from scheduler.executors.jobs import JobRegistry, SparkJob
from scheduler.model import Task

__all__ = [
    "BUILT_IN_EXECUTORS",
    "JobRegistry",
    "RoutingExecutor",
    "SparkJob",
    "build_executor",
]


_ADDED_BY_SETTINGS = {
    "workflow": "programs_file (SCHEDULER_PROGRAMS_FILE) or batch_file",
    "schedules": "programs_file (SCHEDULER_PROGRAMS_FILE) or batch_file",
    "batch": "batch_file (SCHEDULER_BATCH_FILE)",
}
"""Routes a worker on executor `auto` adds only when one of these settings is set: what a task
naming one, on a worker without it, tells the operator."""


class RoutingExecutor:
    """Sends each task to the executor named by its data's `"executor"` key (else `default`)."""

    def __init__(
        self, routes: Mapping[str, Executor], default: str, *, when_empty: str | None = None
    ) -> None:
        for route in (default, when_empty):
            if route is not None and route not in routes:
                raise UnknownExecutorError(
                    f"default executor {route!r} is not among the routes {sorted(routes)}"
                )
        self.routes = dict(routes)
        self.default = default
        self.when_empty = when_empty
        """The route of a task whose data is empty, which names no executor and no work
        (`auto` runs it on `noop`: it succeeds doing nothing); None: `default` as any other."""

    def route(self, task: Task) -> Executor:
        """The executor for `task`, or `UnknownExecutorError` listing the known ones."""
        if not task.data and self.when_empty is not None:
            return self.routes[self.when_empty]
        name = task.data.get("executor", self.default)
        executor = self.routes.get(name) if isinstance(name, str) else None
        if executor is None:
            known = ", ".join(sorted(self.routes))
            setting = _ADDED_BY_SETTINGS.get(name) if isinstance(name, str) else None
            if setting is not None:
                # Not led by the task's key: `tasks list` shows this error's start beside it.
                raise UnknownExecutorError(
                    f"executor {name!r} runs only on workers with {setting} set, and this one "
                    f"has not (it has {known}): set it on every worker and restart them, then "
                    "`scheduler tasks retry` runs this task again"
                )
            raise UnknownExecutorError(
                f"task {task.key} names executor {name!r}, which this worker does not have; "
                f"known executors: {known}"
            )
        return executor

    def validate(self, task: Task) -> None:
        """Enqueue-time check: the route exists and, if it can, the route accepts the task."""
        executor = self.route(task)
        validate = getattr(executor, "validate", None)
        if not callable(validate):
            return
        try:
            validate(task)
        except TaskDataError as error:
            if "executor" in task.data:
                raise
            others = ", ".join(sorted(set(self.routes) - {self.default}))
            raise type(error)(
                f"{error}; that is what executor {self.default!r} wants, the one of a task that "
                f'names none: to run it on another, put "executor" in its data ({others})'
            ) from None

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        self.route(task)(task, context)

    def stop(self) -> None:
        """Stop every route that can be stopped (the Spark session, for one)."""
        for executor in self.routes.values():
            stop = getattr(executor, "stop", None)
            if callable(stop):
                stop()


BUILT_IN_EXECUTORS = ("noop", "spark", "spark-submit", "command")


def build_executor(name_or_path: str, **settings: Any) -> Executor:
    """An executor from a built-in name or a `"package.module:callable"` path.

    Built-ins take `settings` as constructor keywords. A path naming a class, or any callable when
    settings are given, is called with them to build the executor; otherwise the callable named is
    the executor itself.
    """
    if name_or_path == "noop":
        return noop_executor
    if name_or_path == "spark":
        from scheduler.executors.spark import SparkExecutor

        return SparkExecutor(**settings)
    if name_or_path == "spark-submit":
        from scheduler.executors.spark_submit import SparkSubmitExecutor

        return SparkSubmitExecutor(**settings)
    if name_or_path == "command":
        from scheduler.executors.command import CommandExecutor

        return CommandExecutor(**settings)
    module_name, _, attribute = name_or_path.partition(":")
    if not attribute:
        raise UnknownExecutorError(
            f"unknown executor {name_or_path!r}; use one of {', '.join(BUILT_IN_EXECUTORS)} "
            "or a 'package.module:callable' path"
        )
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise UnknownExecutorError(
            f"cannot load executor {name_or_path!r}: {error}; check the module path and name"
        ) from error
    if isinstance(target, type) or settings:
        made: Executor = target(**settings)
        return made
    if not callable(target):
        raise UnknownExecutorError(f"executor {name_or_path!r} is not callable")
    return cast(Executor, target)
