"""Which code may run: executors by name, and PySpark jobs by name.

Both registries refuse unknown names with `UnknownExecutorError` naming what was asked for and what
is known, because the client calls `validate` at enqueue time: a typo should bounce off
`schedule_task`, not sit in the store until it fails at 3 a.m. At run time the same error ends the
attempt (and, with retries exhausted, the task) with that message.

Nothing here imports pyspark, so producers can validate tasks without a JVM.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from scheduler.errors import TaskDataError, UnknownExecutorError
from scheduler.executors.abc import ExecutionContext, Executor, noop_executor
from scheduler.model import Task

__all__ = ["BUILT_IN_EXECUTORS", "JobRegistry", "RoutingExecutor", "build_executor"]

SparkJob = Callable[[Any, ExecutionContext], object]
"""A PySpark job: `fn(spark, context)`; returns normally on success, raises on failure."""


class JobRegistry:
    """The PySpark jobs a worker agrees to run, by name (`"package.module:function"`).

    Jobs get in two ways: registered explicitly (`register`), or imported on first use when their
    module lies under one of `allowed_prefixes`. Importing anything a task names would let whoever
    can enqueue run any importable function on the workers; prefixes keep that to your own code.
    """

    def __init__(
        self,
        jobs: Mapping[str, SparkJob] | None = None,
        *,
        allowed_prefixes: Iterable[str] = (),
        prefixes_setting: str | None = None,
    ) -> None:
        self._jobs: dict[str, SparkJob] = dict(jobs or {})
        self._prefixes = tuple(p.rstrip(".") for p in allowed_prefixes)
        self._prefixes_setting = prefixes_setting
        """The setting `allowed_prefixes` came from (`SCHEDULER_SPARK_JOB_MODULES`), so that an
        unknown job's error says which value of it would allow the job."""
        self._lock = threading.Lock()

    def register(self, name: str, fn: SparkJob) -> None:
        """Make `fn` runnable as `name` (any string; by convention `package.module:function`)."""
        if not callable(fn):
            raise TypeError(f"job {name!r} must be callable, got {type(fn).__name__}")
        with self._lock:
            self._jobs[name] = fn

    def names(self) -> list[str]:
        """The explicitly registered jobs and those already imported, sorted."""
        with self._lock:
            return sorted(self._jobs)

    def resolve(self, name: str) -> SparkJob:
        """The job called `name`, importing it if its module is under an allowed prefix."""
        with self._lock:
            job = self._jobs.get(name)
        if job is not None:
            return job
        job = self._import(name)
        with self._lock:
            self._jobs.setdefault(name, job)
        return job

    def job_name(self, task: Task) -> str:
        """The job a task names, or a `TaskDataError` saying what the data should look like."""
        name = task.data.get("job")
        if not isinstance(name, str) or not name:
            raise TaskDataError(
                f"task {task.key} has no job name; put the job in its data as "
                '{"job": "package.module:function", "args": {...}}'
            )
        args = task.data.get("args", {})
        if not isinstance(args, Mapping):
            raise TaskDataError(
                f"task {task.key}: 'args' must be a mapping of keyword arguments, "
                f"got {type(args).__name__}"
            )
        return name

    def resolve_task(self, task: Task) -> SparkJob:
        return self.resolve(self.job_name(task))

    def validate(self, task: Task) -> None:
        """Enqueue-time check that `task` names a runnable job."""
        self.resolve_task(task)

    def _import(self, name: str) -> SparkJob:
        module_name, _, attribute = name.partition(":")
        if not attribute or not module_name:
            raise UnknownExecutorError(
                f"Spark job {name!r} is not a 'package.module:function' name; write the module "
                "and the function, such as scheduler.examples.clicks.jobs:rollup_day"
            )
        allowed = any(module_name == p or module_name.startswith(p + ".") for p in self._prefixes)
        if not allowed:
            raise self._unknown(name, module_name)
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise UnknownExecutorError(
                f"Spark job {name!r} cannot be loaded: importing {module_name} failed ({error}); "
                f"install the package that provides {module_name} in this environment (where "
                "tasks are enqueued and where workers run them)"
            ) from error
        job: SparkJob | None = getattr(module, attribute, None)
        if not callable(job):
            raise UnknownExecutorError(
                f"Spark job {name!r} cannot be loaded: {module_name} has no function "
                f"{attribute!r}; check the name after the colon"
            )
        return job

    def _unknown(self, name: str, module_name: str) -> UnknownExecutorError:
        known = ", ".join(self.names()) or "none"
        prefixes = ", ".join(self._prefixes) or "none"
        allow = ",".join((*self._prefixes, module_name))
        if self._prefixes_setting is not None:
            how = (
                f"To allow it, set {self._prefixes_setting}={allow} (where tasks are enqueued "
                "and where workers run them), or register the job in the workers with "
                "JobRegistry.register"
            )
        else:
            how = (
                f"To allow it, build the registry with allowed_prefixes={list(allow.split(','))!r}"
                " or register the job with JobRegistry.register"
            )
        return UnknownExecutorError(
            f"unknown Spark job {name!r}; registered jobs: {known}; modules importable by name: "
            f"{prefixes}. {how}"
        )


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
            raise UnknownExecutorError(
                f"task {task.key} names executor {name!r}, which this worker does not have; "
                f"known executors: {', '.join(sorted(self.routes))}"
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
