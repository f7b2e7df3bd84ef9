"""Runs each task as its own `spark-submit` application.

Task data::

    {"application": "/jobs/report.py",        # or a .jar (then give "class")
     "args": ["--day", "2026-11-21"],
     "conf": {"spark.executor.memory": "2g"},  # merged over the executor's conf
     "class": "com.example.Main", "name": "report", "py_files": ["deps.zip"]}

The trade-off against `SparkExecutor` (see docs/spark.md): every task pays a JVM and SparkContext
start (seconds), but gets its own driver, so a job that leaks memory or crashes its driver hurts
nobody else, and jobs may be JVM applications or need conflicting Spark settings. The exit code is
the verdict; the output goes to `<log_dir>/<safe task key>/attempt-<n>.log`, and a failure's message
names that file and quotes its end, because that is where the Spark error is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from scheduler.errors import TaskDataError
from scheduler.executors.abc import ExecutionContext
from scheduler.executors.command import CommandFailedError, run_process, safe_key, tail
from scheduler.executors.left_running import RUNNING_DIR
from scheduler.executors.spark import require_pyspark
from scheduler.model import Task

__all__ = ["SparkSubmitExecutor", "bundled_spark_submit"]


def bundled_spark_submit() -> str:
    """The `spark-submit` script shipped inside the installed pyspark package.

    Raises `ExecutorUnavailableError` naming the Spark extra when pyspark is not installed.
    """
    require_pyspark(
        "the spark-submit executor, with no `spark_submit` path given,",
        instead="or pass the path of a spark-submit of your own",
    )
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


class SparkSubmitExecutor:
    """Launches `spark-submit` (argv, never a shell) per task attempt; thread-safe.

    `spark_submit=None` means the script bundled with pyspark, looked up when a task first needs
    it: a worker without pyspark still starts, and refuses only the tasks that would need it.
    """

    def __init__(
        self,
        *,
        spark_submit: str | None = None,
        master: str = "local[*]",
        conf: Mapping[str, str] | None = None,
        log_dir: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._spark_submit = spark_submit
        self.master = master
        self.conf = dict(conf or {})
        self.log_dir = Path(log_dir)
        self.env = dict(env or {})

    @property
    def spark_submit(self) -> str:
        """The spark-submit script run for each attempt."""
        if self._spark_submit is None:
            self._spark_submit = bundled_spark_submit()
        return self._spark_submit

    def validate(self, task: Task) -> None:
        """Enqueue-time check of the task data's shape (not of the application file's existence,
        which only the worker's file system can answer)."""
        self.argv(task)

    def argv(self, task: Task) -> list[str]:
        """The spark-submit command line for `task`."""
        if self._spark_submit is None:
            require_pyspark(
                f"task {task.key} (the spark-submit executor, run with the spark-submit that "
                "comes with pyspark)"
            )
        data = task.data
        application = data.get("application")
        if not isinstance(application, str) or not application:
            raise TaskDataError(
                f"task {task.key}: 'application' must name a .py file or a .jar, e.g. "
                '{"application": "jobs/report.py", "args": ["--day", "2026-11-21"]}'
            )
        args = data.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise TaskDataError(f"task {task.key}: 'args' must be a list of strings")
        conf = data.get("conf", {})
        if not isinstance(conf, Mapping):
            raise TaskDataError(f"task {task.key}: 'conf' must map Spark settings to values")
        argv = [self.spark_submit, "--master", self.master]
        argv += ["--name", str(data.get("name", f"scheduler:{task.ordering_id}"))]
        if "class" in data:
            argv += ["--class", str(data["class"])]
        py_files = data.get("py_files", [])
        if py_files:
            if not isinstance(py_files, list):
                raise TaskDataError(f"task {task.key}: 'py_files' must be a list of paths")
            argv += ["--py-files", ",".join(str(p) for p in py_files)]
        for key, value in {**self.conf, **conf}.items():
            argv += ["--conf", f"{key}={value}"]
        return [*argv, application, *args]

    def log_path(self, task: Task, attempt: int) -> Path:
        return self.log_dir / safe_key(task) / f"attempt-{attempt}.log"

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        argv = self.argv(task)
        log = self.log_path(task, context.attempt)
        env = {
            **os.environ,
            # The application's driver must run a Python that has pyspark: this one.
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            **self.env,
            "SCHEDULER_TASK_KEY": str(task.key),
            "SCHEDULER_LOGICAL_TIME": task.scheduled_time.isoformat(),
            "SCHEDULER_ATTEMPT": str(context.attempt),
        }
        code = run_process(
            argv, context, stdout=log, stderr=log, env=env, running=self.log_dir / RUNNING_DIR
        )
        if code != 0:
            raise CommandFailedError(
                f"task {task.key}: spark-submit of {task.data['application']} exited with code "
                f"{code}; full log: {log}\n{tail(log, 15)}"
            )
