"""The PySpark jobs a worker agrees to run, by name: the registry the Spark executors consult.

Apart from the executors' factory (`registry.py`), so that the Spark adapters can use it while the
factory imports them. Nothing here imports pyspark, so producers can validate tasks without a JVM.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from scheduler.errors import TaskDataError, UnknownExecutorError
from scheduler.executors.abc import ExecutionContext
from scheduler.model import Task

__all__ = ["JobRegistry", "SparkJob"]

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
