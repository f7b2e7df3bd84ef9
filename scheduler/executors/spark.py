"""Runs registered PySpark jobs inside one shared SparkSession per worker process.

Why one shared session: starting a JVM and a SparkContext costs seconds, while submitting a job to
a warm context costs milliseconds, and most tasks of a data platform are small. The price is that
tasks share a driver, so this module keeps them apart with what Spark offers for that:

* every call runs under a *job group* named by the task key (`str(task.key)`), set from the
  calling thread; PySpark's pinned-thread mode (the default since Spark 3.2) maps each Python
  thread to its own JVM thread, so the local properties of concurrent calls do not mix;
* the scheduler runs in FAIR mode and every call's jobs go into a FAIR *pool*, so a long job
  cannot starve the short ones submitted after it;
* cancelling the task (`context.cancel`) cancels the job group with `interruptOnCancel`, which
  kills the running Spark tasks, and keeps cancelling it until the job function returns, so a job
  function that ignores cancellation and submits another job is stopped too.

A job is a plain function `fn(spark, context)` named in the task data:
`{"job": "package.module:function", "args": {...}}`. Only registered jobs (see `JobRegistry`) run.

pyspark is an optional dependency (`pip install 'scheduler[spark]'`): this module imports it only
when a session starts, so an install that runs commands alone never needs it, and a Spark task
asked of an environment without it is refused with `ExecutorUnavailableError` naming the extra.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from xml.sax.saxutils import quoteattr

from scheduler.errors import (
    ConfigurationError,
    ExecutorUnavailableError,
    SparkTaskError,
    TaskCancelledError,
    TaskDataError,
)
from scheduler.executors.abc import ExecutionContext
from scheduler.executors.jobs import JobRegistry
from scheduler.model import Task

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

__all__ = [
    "SPARK_EXTRA",
    "JobRegistry",
    "Pool",
    "SparkExecutor",
    "default_conf",
    "local_cores",
    "pyspark_installed",
    "require_java",
    "require_pyspark",
    "session_conf",
    "shared_session",
    "spark_task_error",
    "stop_shared_session",
]

log = logging.getLogger(__name__)

#: How often a cancelled job group is cancelled again while its job function still runs.
RECANCEL_INTERVAL_S = 0.2

#: The extra that installs pyspark, named by every error about its absence.
SPARK_EXTRA = "scheduler[spark]"


@functools.cache
def pyspark_installed() -> bool:
    """Whether pyspark can be imported here, found without importing it (a fifth of a second).

    Cached: the look-up costs about half a millisecond, and producers ask for every Spark task.
    """
    try:
        return importlib.util.find_spec("pyspark") is not None
    except (ImportError, ValueError):
        return False


TASK_ALTERNATIVE = 'or have the task run by another executor, e.g. {"executor": "command", ...}'
"""What a task that needs pyspark could do instead, for `require_pyspark`."""


def require_pyspark(what: str, *, instead: str = TASK_ALTERNATIVE) -> None:
    """Raise `ExecutorUnavailableError` saying that `what` needs pyspark, unless it is installed.

    `what` names the thing asked for, as the reader knows it ("task orders-42/... (Spark job
    'pkg.jobs:daily', the spark executor)", "the spark executor"); `instead` is the way around
    it that fits the caller, if any.
    """
    if pyspark_installed():
        return
    raise ExecutorUnavailableError(
        f"{what} needs pyspark, which is not installed in this environment ({sys.executable}); "
        f"install the Spark extra with `pip install '{SPARK_EXTRA}'` (scripts/setup.sh does)"
        + (f", {instead}" if instead else "")
    )


def require_java() -> None:
    """Raise `ConfigurationError` when no Java can start Spark's driver JVM.

    pyspark launches `$JAVA_HOME/bin/java`, else `java` on PATH; without either it fails with a
    gateway error that never says "Java".
    """
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return
    if shutil.which("java"):
        return
    where = f"JAVA_HOME={home!r} has no bin/java and " if home else ""
    raise ConfigurationError(
        f"the spark executor starts Spark's driver, a JVM, but {where}no `java` is on PATH; "
        "install Java 17 (e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME to one"
    )


@dataclass(frozen=True, slots=True)
class Pool:
    """A FAIR scheduler pool, written to the allocation file when the session starts."""

    weight: int = 1
    """Share of the cluster relative to the other pools."""
    min_share: int = 0
    """Cores the pool gets before any weight-based sharing."""
    mode: Literal["FAIR", "FIFO"] = "FAIR"
    """How jobs inside the pool share it; FAIR so concurrent tasks in one pool share too."""


DEFAULT_POOLS: Mapping[str, Pool] = {"default": Pool()}

_session_lock = threading.Lock()
_session: SparkSession | None = None


def shared_session(
    *,
    master: str = "local[*]",
    app_name: str = "scheduler",
    conf: Mapping[str, str] | None = None,
    pools: Mapping[str, Pool] = DEFAULT_POOLS,
) -> SparkSession:
    """The worker process's SparkSession, created on first use with these settings.

    Later calls return the same session whatever they pass: a process has one SparkContext.
    """
    global _session
    with _session_lock:
        if _session is not None:
            return _session
        if os.environ.get("PYSPARK_PIN_THREAD", "true").lower() != "true":
            raise ConfigurationError(
                "PYSPARK_PIN_THREAD is set to false; the Spark executor needs pinned-thread mode "
                "so that each task's job group stays on its own thread. Unset it."
            )
        require_pyspark(f"a SparkSession (master {master!r})", instead="")
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        if SparkContext._active_spark_context is None:  # no JVM of ours runs yet
            require_java()

        if master.startswith("local"):
            # Local Python workers must run this interpreter, which has pyspark and the jobs;
            # on a cluster the executors' Python is the cluster's business.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            # A local session talks only to itself: bind to loopback instead of guessing an
            # interface from the host name (which warns, and may pick an unreachable one).
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings = session_conf(master, conf)
        written = None
        if "spark.scheduler.allocation.file" not in settings:
            written = _write_allocation_file(pools)
            settings["spark.scheduler.allocation.file"] = str(written)
        builder = SparkSession.builder.master(master).appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        try:
            session = builder.getOrCreate()
        finally:
            # The SparkContext reads the file while it starts and never again: without this,
            # every worker start left a directory behind in the temporary directory.
            if written is not None:
                shutil.rmtree(written.parent, ignore_errors=True)
        mode = session.sparkContext.getConf().get("spark.scheduler.mode", "FIFO")
        if mode.upper() != "FAIR":
            log.warning(
                "SparkSession was created before the scheduler with spark.scheduler.mode=%s; "
                "concurrent tasks will queue behind each other (FIFO). Create it with FAIR.",
                mode,
            )
        _session = session
        return session


def session_conf(master: str, conf: Mapping[str, str] | None) -> dict[str, str]:
    """The settings a new session of `master` gets: `default_conf`, overridden by `conf`."""
    return {**default_conf(master), **(conf or {})}


def default_conf(master: str) -> dict[str, str]:
    """The Spark settings a session gets unless `conf` sets them; docs/spark.md says why each.

    With a local master, work runs on this machine's cores only, and the data a single worker
    process handles is small: Spark's default of 200 shuffle partitions would turn every
    shuffle of a few thousand rows into 200 tasks, each costing milliseconds of scheduling and
    serialisation for a handful of rows. So a shuffle gets one partition per local core, and
    adaptive execution may also coalesce the partitions of a cached plan (off in Spark by
    default).
    """
    settings = {
        "spark.scheduler.mode": "FAIR",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
    }
    cores = local_cores(master)
    if cores is not None:
        settings["spark.sql.shuffle.partitions"] = str(cores)
        settings["spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"] = "true"
    return settings


_LOCAL_MASTER = re.compile(r"local(?:\[(?P<threads>\*|\d+)(?:,\s*\d+)?\])?")


def local_cores(master: str) -> int | None:
    """The cores a local master runs tasks on (`local` 1, `local[4]` 4, `local[*]` this
    machine's), or None for a cluster master (`yarn`, `spark://...`, `local-cluster[...]`)."""
    match = _LOCAL_MASTER.fullmatch(master.strip())
    if match is None:
        return None
    threads = match.group("threads")
    if threads is None:
        return 1
    if threads == "*":
        # As the JVM counts them (Runtime.availableProcessors): the cores this process may use.
        usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        return len(usable) if usable else max(1, os.cpu_count() or 1)
    return max(1, int(threads))


def stop_shared_session() -> None:
    """Stop the worker's SparkSession; the next `shared_session` call creates a new one."""
    global _session
    with _session_lock:
        if _session is not None:
            _session.stop()
            _session = None


def _write_allocation_file(pools: Mapping[str, Pool]) -> Path:
    """Write a fairscheduler.xml for `pools`; Spark reads it once, when the context starts."""
    lines = ['<?xml version="1.0"?>', "<allocations>"]
    for name, pool in pools.items():
        lines += [
            f"  <pool name={quoteattr(name)}>",
            f"    <schedulingMode>{pool.mode}</schedulingMode>",
            f"    <weight>{int(pool.weight)}</weight>",
            f"    <minShare>{int(pool.min_share)}</minShare>",
            "  </pool>",
        ]
    lines.append("</allocations>")
    directory = Path(tempfile.mkdtemp(prefix="scheduler-spark-"))
    path = directory / "fairscheduler.xml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class SparkExecutor:
    """Runs `{"job": "pkg.mod:func", "args": {...}, "pool": "..."}` tasks in the shared session.

    Thread-safe: the engine calls it from several pool threads at once; each call's job group and
    pool are local properties of its own thread.
    """

    def __init__(
        self,
        *,
        master: str = "local[*]",
        app_name: str = "scheduler",
        conf: Mapping[str, str] | None = None,
        jobs: JobRegistry | None = None,
        pools: Mapping[str, Pool] = DEFAULT_POOLS,
        default_pool: str = "default",
    ) -> None:
        if default_pool not in pools:
            raise ConfigurationError(
                f"default pool {default_pool!r} is not among the configured pools "
                f"{sorted(pools)}; add it to `pools`"
            )
        self.master = master
        self.app_name = app_name
        self.conf = dict(conf or {})
        self.jobs = (
            jobs if jobs is not None else JobRegistry(allowed_prefixes=("scheduler.examples",))
        )
        self.pools = dict(pools)
        self.default_pool = default_pool

    def session(self) -> SparkSession:
        """The shared session, started on first use (seconds), then reused (free)."""
        return shared_session(
            master=self.master, app_name=self.app_name, conf=self.conf, pools=self.pools
        )

    def validate(self, task: Task) -> None:
        """Enqueue-time check: pyspark is installed, the job is registered, the pool is known."""
        self._require_pyspark(task)
        self.jobs.resolve_task(task)
        self._pool_of(task)

    def __call__(self, task: Task, context: ExecutionContext) -> None:
        self._require_pyspark(task)
        job_name = self.jobs.job_name(task)
        job = self.jobs.resolve_task(task)
        pool = self._pool_of(task)
        context.raise_if_cancelled()
        spark = self.session()
        sc = spark.sparkContext
        group = str(task.key)
        description = f"{job_name} (attempt {context.attempt}, partition {context.partition})"
        sc.setJobGroup(group, description, interruptOnCancel=True)
        sc.setLocalProperty("spark.scheduler.pool", pool)
        finished = threading.Event()
        context.on_cancel(lambda: _cancel_until_finished(sc, group, finished))
        try:
            job(spark, context)
        except Exception as error:
            if context.is_cancelled:
                raise TaskCancelledError(
                    f"task {task.key} was cancelled ({context.reason}) while running Spark job "
                    f"{job_name}"
                ) from error
            python_error = spark_task_error(error)
            if python_error is None:
                raise
            # Spark's report puts the Python exception after a thousand characters of frames;
            # the task's last error (and `tasks list`) shows its beginning.
            raise SparkTaskError(
                f"{python_error} (raised in a Spark task of job {job_name}; Spark's report "
                f"follows)\n{error}"
            ) from error
        finally:
            finished.set()
            # Pool threads are reused: leave no group or pool behind for the next task.
            sc._jsc.clearJobGroup()
            sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
        context.raise_if_cancelled()

    def stop(self) -> None:
        """Stop the worker's SparkSession (shared by every SparkExecutor of the process)."""
        stop_shared_session()

    def _require_pyspark(self, task: Task) -> None:
        job = task.data.get("job")
        named = f"Spark job {job!r}" if isinstance(job, str) and job else "a Spark job"
        require_pyspark(f"task {task.key} ({named}, the spark executor)")

    def _pool_of(self, task: Task) -> str:
        pool = task.data.get("pool", self.default_pool)
        if pool not in self.pools:
            raise TaskDataError(
                f"task {task.key} asks for Spark pool {pool!r}, which is not configured; "
                f"use one of {sorted(self.pools)} or omit 'pool'"
            )
        return str(pool)


_TRACEBACK = "Traceback (most recent call last):"


def spark_task_error(error: BaseException) -> str | None:
    """The Python exception (`ValueError: bad row`) that failed a Spark task, found in the
    report of `error`, an exception raised by pyspark or Py4J; None for any other error, or when
    the report holds no Python traceback (a JVM-side failure)."""
    if not type(error).__module__.startswith(("pyspark", "py4j")):
        return None
    text = str(error)
    at = text.rfind(_TRACEBACK)
    if at < 0:
        return None
    lines = text[at + len(_TRACEBACK) :].splitlines()
    # Frames are indented; the first line that is not is the exception, its message may go on
    # until a blank line or the JVM's stack ("\tat org.apache...").
    for index, line in enumerate(lines):
        if line and not line[0].isspace():
            message = [line]
            for more in lines[index + 1 :]:
                if not more.strip() or more.startswith(("\tat ", "JVM stacktrace")):
                    break
                message.append(more)
            return "\n".join(message).strip()
    return None


def _cancel_until_finished(sc: SparkContext, group: str, finished: threading.Event) -> None:
    """Cancel `group` now, then again every RECANCEL_INTERVAL_S until the job function returns.

    `cancelJobGroup` only reaches jobs that are already running; a job function that does not
    check `context.cancelled` may submit another job right after. Re-cancelling catches those.
    """
    sc.cancelJobGroup(group)

    def keep_cancelling() -> None:
        while not finished.wait(RECANCEL_INTERVAL_S):
            sc.cancelJobGroup(group)

    threading.Thread(target=keep_cancelling, name=f"cancel {group}", daemon=True).start()
