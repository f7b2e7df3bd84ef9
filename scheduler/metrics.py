"""Prometheus metrics of the engine and the client.

Names follow Prometheus conventions (`_total` counters, base units). They are module-level, so
every worker in a process shares them; the CLI serves them with `--metrics-port`.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, wait

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)


def ticked(counter: itertools.count[int]) -> int:
    """How many values `counter` (an `itertools.count(1)`) has given so far.

    A count shows its next value only in its repr, `count(N)`: N - 1 were given.
    """
    return int(repr(counter)[6:-1]) - 1


class TickCounter(Collector):
    """A Prometheus counter for per-record paths, counted one at a time by `tick()`.

    `Counter.inc` takes a lock and costs about a microsecond, as much as encoding the record it
    counts. `tick` is `next` on an `itertools.count`: one C call, atomic under the GIL, no lock.
    The value is read only when Prometheus scrapes. `add` counts many at once (a bulk call).
    """

    def __init__(
        self, name: str, documentation: str, *, registry: CollectorRegistry = REGISTRY
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._ticks = itertools.count(1)
        self.tick = self._ticks.__next__
        self._added = 0
        self._add_lock = threading.Lock()
        registry.register(self)

    def add(self, amount: int) -> None:
        with self._add_lock:
            self._added += amount

    @property
    def value(self) -> int:
        return ticked(self._ticks) + self._added

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self._name, self._documentation, value=self.value)


LagSource = Callable[[], Mapping[int, int]]
"""Gives the lag of each partition a worker owns, asking the log."""

LAG_SCRAPE_BUDGET_S = 3.0
"""How long a scrape waits for a source's lag (see `LagCollector`): a healthy log answers in
tens of milliseconds, and the whole scrape stays well inside Prometheus' default 10 s."""


class LagCollector(Collector):
    """`scheduler_consumer_lag_records{partition}`, asked of the log when Prometheus scrapes.

    Lag is the log's fact (end offset minus the group's committed offset), so it is read then,
    not kept up to date between scrapes. Each worker of the process registers a source that
    gives the lag of the partitions it owns: a fleet's sum is the lag of every owned partition
    (an unowned one is `scheduler_partitions_owned`'s alert). A source that cannot answer (the
    log unreachable) is left out of that scrape, and so is one that has not answered within
    `budget_s`: the first requests after a broker restart take up to `request_timeout_s` (see
    docs/kafka.md), and a scrape that waited for them would outlast Prometheus' default 10 s
    scrape timeout and lose every other series with it. Each source is asked on a thread of its
    own, one request at a time: a later scrape takes the answer of a request still under way
    rather than piling another on a log that is slow already.
    """

    NAME = "scheduler_consumer_lag_records"
    DOCUMENTATION = (
        "Records on an owned log partition past the group's committed offset: enqueued, not yet "
        "in the store (read from the log when scraped)."
    )

    def __init__(
        self, *, registry: CollectorRegistry = REGISTRY, budget_s: float = LAG_SCRAPE_BUDGET_S
    ) -> None:
        self._sources: list[LagSource] = []
        self._asking: dict[LagSource, Future[Mapping[int, int]]] = {}
        """The request under way for each source, until it answers."""
        self._lock = threading.Lock()
        self.budget_s = budget_s
        registry.register(self)

    def watch(self, source: LagSource) -> None:
        with self._lock:
            self._sources.append(source)

    def unwatch(self, source: LagSource) -> None:
        with self._lock:
            if source in self._sources:
                self._sources.remove(source)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield self._family()  # without asking the sources, as registering would

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = self._family()
        with self._lock:
            asked = [self._ask(source) for source in self._sources]
        wait(asked, timeout=self.budget_s)
        for answer in asked:
            if not answer.done():
                logger.warning(
                    "consumer lag left out of the metrics: the log has not answered within "
                    "%g s (a broker restarting?); the next scrape takes its answer or asks again",
                    self.budget_s,
                )
                continue
            error = answer.exception()
            if error is not None:  # a scrape must not fail for one unreachable log
                logger.warning("consumer lag left out of the metrics: %s", error)
                continue
            for partition, lag in sorted(answer.result().items()):
                family.add_metric([str(partition)], lag)
        yield family

    def _ask(self, source: LagSource) -> Future[Mapping[int, int]]:
        """The source's request under way, or a new one on a thread of its own (under the lock).
        A daemon thread: a log that never answers must not hold the process at exit."""
        answer = self._asking.get(source)
        if answer is None:
            answer = self._asking[source] = Future()
            threading.Thread(
                target=self._answer, args=(source, answer), name="lag-scrape", daemon=True
            ).start()
        return answer

    def _answer(self, source: LagSource, answer: Future[Mapping[int, int]]) -> None:
        try:
            answer.set_result(source())
        except BaseException as error:
            answer.set_exception(error)
        finally:
            with self._lock:
                if self._asking.get(source) is answer:
                    del self._asking[source]

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.NAME, self.DOCUMENTATION, labels=["partition"])


ENQUEUED = TickCounter("scheduler_tasks_enqueued", "Tasks accepted by schedule_task.")
PERSISTED = Counter("scheduler_tasks_persisted_total", "Tasks written to the store by workers.")
EXECUTED = Counter("scheduler_tasks_executed_total", "Task attempts that succeeded.")
FAILED = Counter("scheduler_tasks_failed_total", "Tasks that failed their last attempt (FAILED).")
RETRIED = Counter("scheduler_tasks_retried_total", "Failed attempts that will be retried.")
CANCELLED = Counter("scheduler_tasks_cancelled_total", "Tasks cancelled before they completed.")
RUN_AGAIN = Counter(
    "scheduler_tasks_run_again_total",
    "Finished tasks an operator had run again (`tasks retry` of a FAILED one, `tasks rerun`).",
)
SPILLED = Counter(
    "scheduler_tasks_spilled_total",
    "Tasks persisted behind the read checkpoint but left for a later load (in-flight bound).",
)
MALFORMED = Counter(
    "scheduler_records_malformed_total",
    "Log records set aside as malformed (listed by `scheduler malformed list`).",
)
MISROUTED = Counter(
    "scheduler_records_misrouted_total",
    "Tasks read from a partition other than their ordering id's (a producer not using murmur2).",
)
RECORDS_DELETED_UNREAD = Counter(
    "scheduler_records_deleted_unread_total",
    "Log records the topic's retention deleted before any worker stored them (at assignment, "
    "or while a worker read behind the retention): lost.",
)
IN_FLIGHT = Gauge("scheduler_tasks_in_flight", "Tasks held in memory by owned partitions.")
RUNNING = Gauge("scheduler_tasks_running", "Executor calls running now.")
PARTITIONS_OWNED = Gauge("scheduler_partitions_owned", "Log partitions this process owns.")
PARTITION_RESTARTS = Counter(
    "scheduler_partition_restarts_total", "Partition actor trees restarted after a failure."
)
PERSIST_FAILURES = Counter(
    "scheduler_persist_failures_total",
    "Batches of log records the store refused or failed to write (held, their partition paused, "
    "and written again after a backoff).",
)
CONSUMER_LAG = LagCollector()
FIRING_LAG = Histogram(
    "scheduler_firing_lag_seconds",
    "Start of a task's first attempt minus its scheduled time.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)

TASK_DURATION = Histogram(
    "scheduler_task_duration_seconds",
    "Run time of a task attempt, from the executor call's start to its end, by outcome "
    "(succeeded, failed, timed_out, cancelled, interrupted).",
    labelnames=["outcome"],
    buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600),
)
INTERRUPTED = Counter(
    "scheduler_tasks_interrupted_total",
    "Attempts found running by a partition's next owner (their worker died or was stopped), "
    "closed as interrupted; their tasks run again.",
)

# Programs and runs (scheduler.programs).
RUNS_LAUNCHED = Counter(
    "scheduler_runs_launched_total", "Runs written PENDING by a launch (a request launches once)."
)
LAUNCHES_REFUSED = Counter(
    "scheduler_launches_refused_total", "Launch requests refused at their concurrency limit."
)
RUNS_RUNNING = Gauge("scheduler_runs_running", "Runs whose program runs in this process now.")
RUNS_ENDED = Counter(
    "scheduler_runs_ended_total", "Runs that reached a terminal status, by status.", ["status"]
)
LAUNCH_LATENCY = Histogram(
    "scheduler_run_launch_latency_seconds",
    "From a launch request's time (a fire's logical time, an operator's request) to the run's "
    "first start.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)


# Schedules (scheduler.schedules). Their launch latency, from the event or fire that satisfied
# the trigger to the run's start, is scheduler_run_launch_latency_seconds: a schedule's launch
# request is timed by that event.
SCHEDULE_FIRES = Counter(
    "scheduler_schedule_fires_total", "Cron fires handled by schedules (caught-up ones too)."
)
SCHEDULE_JOBS = Gauge(
    "scheduler_schedule_jobs",
    "Stored schedule jobs in each state (PENDING_TRIGGER, PENDING_CONSTRAINT, PENDING_LAUNCH, "
    "ABORTED, TIMED_OUT, OBSOLETE): jobs this process moved into the state less those it moved "
    "out of it or deleted; summed over a fleet's workers it is the store's count of the jobs "
    "they changed since they started.",
    ["state"],
)
CONSTRAINT_ABORTS = Counter(
    "scheduler_schedule_constraint_aborts_total",
    "Schedule jobs aborted by a constraint that does not wait (or a refused launch).",
)


# Batch jobs (scheduler.batch).
BATCH_PARTITIONS = Gauge(
    "scheduler_batch_partitions",
    "Partitions of each batch job by state (succeeded, marked_success, running, failed, removed, "
    "waiting_time, pending), as of the batch queue's last decision.",
    ["job", "state"],
)
BATCH_OLDEST_PENDING = Gauge(
    "scheduler_batch_oldest_pending_seconds",
    "Age of each batch job's oldest due partition not done, running or failed (0 when none).",
    ["job"],
)


def reference() -> str:
    """The Markdown table of every `scheduler_*` metric, as docs/metrics.md holds it."""
    rows = ["| metric | type | meaning |", "| --- | --- | --- |"]
    for family in REGISTRY.collect():
        if not family.name.startswith("scheduler_"):
            continue
        # The exposition's name: counters carry `_total`, histograms `_bucket`/`_sum`/`_count`.
        name = f"{family.name}_total" if family.type == "counter" else family.name
        rows.append(f"| `{name}` | {family.type} | {family.documentation} |")
    return "\n".join(rows) + "\n"
