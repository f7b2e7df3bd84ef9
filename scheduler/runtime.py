"""Adapters built from `Settings`: the one place that maps configuration onto constructors.

Heavy imports (confluent-kafka, cassandra-driver, pyspark) happen inside the branch that needs
them, so a missing optional dependency is reported for the setting that asked for it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from scheduler.errors import (
    ConfigurationError,
    PartitionCountMismatchError,
    SchedulerError,
    UnknownExecutorError,
)
from scheduler.settings import BUILT_IN_EXECUTORS, Settings, env_name

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import ExitStack

    from scheduler.client import SchedulerClient
    from scheduler.executors.abc import Executor
    from scheduler.logs.abc import TaskLog
    from scheduler.model import Task
    from scheduler.stores.abc import TaskStore
    from scheduler.stores.cassandra import CassandraTaskStore

EMBEDDED_LOG_FILE = "log.db"
"""The embedded task log's file inside `data_dir`."""
EMBEDDED_STORE_FILE = "store.db"
"""The SQLite task store's file inside `data_dir`."""
PARTITION_COUNT_META = "partition_count"
"""The store metadata entry that pins the partition count the data was partitioned with."""


def data_dir(settings: Settings) -> Path:
    """The data directory, absolute and created if missing."""
    path = settings.data_dir.expanduser().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigurationError(
            f"{env_name('data_dir')}={str(settings.data_dir)!r} cannot be created: {error}; "
            "choose a writable directory"
        ) from error
    return path


def build_log(settings: Settings) -> TaskLog:
    """The task log named by `settings.log` (not yet holding any topic)."""
    if settings.log == "kafka":
        from scheduler.logs.kafka import KafkaTaskLog

        return KafkaTaskLog(
            bootstrap_servers=settings.kafka_bootstrap,
            topic=settings.topic,
            replication_factor=settings.kafka_replication_factor,
            connect_timeout_s=settings.kafka_connect_timeout_s,
            producer_config={**settings.kafka_config, **settings.kafka_producer_config} or None,
            consumer_config={**settings.kafka_config, **settings.kafka_consumer_config} or None,
        )
    from scheduler.logs.embedded import EmbeddedTaskLog

    return EmbeddedTaskLog(path=str(data_dir(settings) / EMBEDDED_LOG_FILE), topic=settings.topic)


_FROM_SETTINGS: Any = object()
"""`connect`'s default `validate`: the check `task_check` builds from the settings."""


def connect(
    settings: Settings | None = None,
    *,
    validate: Callable[[Task], None] | None = _FROM_SETTINGS,
    admin: bool = False,
) -> SchedulerClient:
    """A `SchedulerClient` for the deployment `settings` describe (default: the workers'
    `SCHEDULER_*` variables over the `$SCHEDULER_CONFIG` file); it owns the log it opened.

    The topic's partition count is checked as `scheduler enqueue` does
    (`PartitionCountMismatchError`). Every task is checked by `validate` before it is sent:
    by default `task_check(settings)`, the configured executor's own check (None checks only
    the time and the data's size). `admin`: open the deployment's existing task store too, for
    the bulk operations (`retry_tasks`, `drop_tasks`, `rerun_tasks`).
    """
    from scheduler.client import SchedulerClient
    from scheduler.config import load_settings

    settings = settings if settings is not None else load_settings()
    if validate is _FROM_SETTINGS:
        validate = task_check(settings)
    log = build_log(settings)
    store: TaskStore | None = None
    try:
        if admin:
            store = open_existing_store(settings)
            partition_count_check(log, store, settings.partitions, create_topic=False)
        else:
            topic_partition_check(log, settings.partitions)
        return SchedulerClient(
            log=log,
            grace_window_s=settings.grace_window_s,
            max_data_bytes=settings.max_data_bytes,
            validate=validate,
            owns_log=True,
            store=store,
        )
    except BaseException:
        log.close()
        if store is not None:
            store.close()
        raise


def open_sender(stack: ExitStack, settings: Settings, *, adds: bool = False) -> SchedulerClient:
    """A client on the log of `settings`, both closed with `stack`: what a command that sends
    control tasks (schedule changes, batch loads) opens beside its stores. `adds` makes the
    topic too, as `enqueue` does."""
    from scheduler.client import SchedulerClient

    log = build_log(settings)
    stack.callback(log.close)
    if adds:
        topic_partition_check(log, settings.partitions)
    return stack.enter_context(SchedulerClient(log=log, grace_window_s=settings.grace_window_s))


def build_store(settings: Settings) -> TaskStore:
    """The task store named by `settings.store`, not opened yet (see `open_store`)."""
    if settings.store == "cassandra":
        from scheduler.stores.cassandra import CassandraTaskStore

        hosts, port = cassandra_contact(settings)
        return CassandraTaskStore(
            hosts=hosts,
            port=port,
            keyspace=settings.cassandra_keyspace,
            bucket_ms=settings.bucket_ms,
            read_slice_ms=max(1, round(settings.cassandra_read_slice_s * 1000)),
            replication=cassandra_replication(settings),
            consistency=settings.cassandra_consistency,
            local_dc=settings.cassandra_local_dc,
            status_retention_s=settings.status_retention_s,
            ordering_index=settings.cassandra_ordering_index,
            **cassandra_security(settings),
        )
    from scheduler.stores.sqlite import SqliteTaskStore

    return SqliteTaskStore(
        path=str(data_dir(settings) / EMBEDDED_STORE_FILE),
        bucket_ms=settings.bucket_ms,
        status_retention_s=settings.status_retention_s,
    )


def open_store(settings: Settings, *, create_schema: bool | None = None) -> TaskStore:
    """`build_store`, opened; the schema is created if `create_schema` (default: the setting)."""
    store = build_store(settings)
    store.open(create_schema=settings.create_schema if create_schema is None else create_schema)
    return store


class _Opens(Protocol):
    def open(self, *, create_schema: bool = ...) -> None: ...


BesideStore = TypeVar("BesideStore", bound=_Opens)


def open_beside(
    settings: Settings,
    store: TaskStore,
    *,
    cassandra: Callable[[CassandraTaskStore], BesideStore],
    sqlite: Callable[[str], BesideStore],
    create_schema: bool | None = None,
) -> BesideStore:
    """A store that keeps its tables beside the opened task store `store` (made by `sqlite` on
    the same file, or by `cassandra` on the same keyspace), opened; its tables are created if
    `create_schema` (default: the setting on Cassandra, always on SQLite)."""
    beside: BesideStore
    if settings.store == "cassandra":
        from scheduler.stores.cassandra import CassandraTaskStore

        assert isinstance(store, CassandraTaskStore)
        beside = cassandra(store)
    else:
        beside = sqlite(str(data_dir(settings) / EMBEDDED_STORE_FILE))
    if create_schema is None:
        create_schema = settings.create_schema or settings.store == "sqlite"
    beside.open(create_schema=create_schema)
    return beside


def open_existing(settings: Settings) -> tuple[TaskLog, TaskStore]:
    """The log and the opened store of a deployment that exists: no topic, keyspace or data
    directory is created, so a mistyped name is said at once."""
    store = open_existing_store(settings)
    try:
        return build_log(settings), store
    except BaseException:
        store.close()
        raise


def open_existing_store(settings: Settings, *, adds: bool = False) -> TaskStore:
    """The opened store of a deployment that exists (see `open_existing`); an embedded store is
    created if only the log is there (tasks enqueued, no worker has run yet). An embedded data
    directory that holds neither the log nor the store is refused, unless the command `adds`
    to the deployment (creates schedules, loads batch jobs), which may begin it as `enqueue`
    does."""
    files = [EMBEDDED_LOG_FILE] * (settings.log == "embedded")
    files += [EMBEDDED_STORE_FILE] * (settings.store == "sqlite")
    home = settings.data_dir.expanduser().resolve()  # not `data_dir`, which creates it
    if files and not adds and not any((home / name).is_file() for name in files):
        raise ConfigurationError(
            f"no scheduler data in {home} (no {' or '.join(files)}): nothing has been enqueued "
            "or run with this data directory; run the command where the workers run, or point "
            f"{env_name('data_dir')} at their data directory"
        )
    return open_store(settings, create_schema=settings.store == "sqlite")


def cassandra_replication(settings: Settings) -> dict[str, Any]:
    """The keyspace replication map for `CREATE KEYSPACE`."""
    if settings.cassandra_replication_strategy == "NetworkTopologyStrategy":
        return {"class": "NetworkTopologyStrategy", **settings.cassandra_datacenters}
    return {"class": "SimpleStrategy", "replication_factor": settings.cassandra_replication_factor}


def cassandra_security(settings: Settings) -> dict[str, Any]:
    """The store's `credentials` and `tls` arguments from the settings."""
    from scheduler.stores.cassandra_security import Credentials, TlsOptions

    security: dict[str, Any] = {}
    if settings.cassandra_username is not None and settings.cassandra_password is not None:
        security["credentials"] = Credentials(
            settings.cassandra_username, settings.cassandra_password
        )
    if settings.cassandra_tls_on:
        security["tls"] = TlsOptions(
            ca_file=settings.cassandra_tls_ca_file,
            cert_file=settings.cassandra_tls_cert_file,
            key_file=settings.cassandra_tls_key_file,
            key_password=settings.cassandra_tls_key_password,
            check_hostname=settings.cassandra_tls_check_hostname,
        )
    return security


def cassandra_contact(settings: Settings) -> tuple[list[str], int]:
    """Contact points and the one CQL port (cassandra-driver takes a single port)."""
    hosts: list[str] = []
    ports: set[int] = set()
    for item in settings.cassandra_hosts:
        # host, host:port, [v6]:port; a bare IPv6 address (two colons or more) has no port.
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":")
        elif item.count(":") == 1:
            host, _, port = item.partition(":")
        else:
            host, port = item, ""
        if port and not port.isdigit():
            raise ConfigurationError(
                f"{env_name('cassandra_hosts')} entry {item!r} has port {port!r}, not a number; "
                "write host or host:port, such as 127.0.0.1:9042"
            )
        hosts.append(host)
        if port:
            ports.add(int(port))
    if len(ports) > 1:
        raise ConfigurationError(
            f"{env_name('cassandra_hosts')} names several ports {sorted(ports)}; "
            "the driver uses one port for every host, so give them all the same one"
        )
    return hosts, ports.pop() if ports else settings.cassandra_port


def task_check(settings: Settings, *, set_by: str | None = None) -> Callable[[Task], None] | None:
    """The configured executor's check of a task at enqueue, or None if it has none: the one
    `connect()` and the CLI apply. What it refuses names the executor and where it was set
    (`set_by`): the check is only right if the producer's executor setting is the workers'."""
    from scheduler.errors import TaskRejected

    validate = getattr(build_executor(settings, set_by=set_by), "validate", None)
    if validate is None:
        return None
    where = set_by or env_name("executor")
    given = "the default" if "executor" not in settings.model_fields_set else where
    hint = (
        f"checked against executor {settings.executor!r} ({given}); if the workers run another, "
        f"set {env_name('executor')} here as they have it"
    )

    def check(task: Task) -> None:
        try:
            validate(task)
        except TaskRejected as error:
            raise type(error)(f"{error} ({hint})") from None

    return check


def build_executor(settings: Settings, *, set_by: str | None = None) -> Executor:
    """The executor named by `settings.executor`: a built-in or a `package.module:callable`
    (a class is instantiated without arguments). `auto` routes each task by its data's
    `"executor"` key (`spark` when absent). Errors name the setting as `set_by`, else as its
    environment variable. `spark` and `spark-submit` are refused without pyspark; `auto`
    refuses only the tasks that need it.
    """
    name = settings.executor
    setting = f"{set_by or env_name('executor')}={name!r}"
    if name not in BUILT_IN_EXECUTORS:
        return _import_executor(name, setting)
    registry = importlib.import_module("scheduler.executors.registry")
    try:
        if name == "auto":
            routes = {
                route: registry.build_executor(route, **_executor_options(settings, route))
                for route in BUILT_IN_EXECUTORS
                if route != "auto"
            }
            # A task with empty data names no work: it runs on noop (docs/cli.md, "auto").
            routing: Executor = registry.RoutingExecutor(routes, default="spark", when_empty="noop")
            return routing
        if name in ("spark", "spark-submit"):
            from scheduler.executors.spark import require_pyspark

            require_pyspark(
                f"the {name} executor",
                instead="or choose an executor that runs without it (auto, command, noop)",
            )
        built: Executor = registry.build_executor(name, **_executor_options(settings, name))
        return built
    except (ImportError, UnknownExecutorError) as error:
        raise ConfigurationError(f"{setting} cannot be built: {error}") from error


def stop_left_running_commands(settings: Settings) -> list[str]:
    """Stop the commands a worker on this data directory left running when it died (see
    `scheduler.executors.left_running`); before a worker runs anything. Returns their tasks."""
    from scheduler.executors.left_running import stop_left_running

    return [task for notes in _running_notes(settings) for task in stop_left_running(notes)]


def watch_left_running_commands(settings: Settings) -> Callable[[], None]:
    """Start the process that stops this worker's commands if it dies without a stop (see
    `scheduler.executors.left_running`); what ends that process at a clean stop."""
    from scheduler.executors.left_running import watch

    return watch(_running_notes(settings))


def _running_notes(settings: Settings) -> list[Path]:
    """The directories where the built-in executors note the commands they run."""
    from scheduler.executors.left_running import RUNNING_DIR

    return [_log_dir(settings, name) / RUNNING_DIR for name in ("command", "spark-submit")]


def _log_dir(settings: Settings, executor: str) -> Path:
    """Where a built-in executor writes its output (`<data_dir>/logs/<executor>`)."""
    # Not `data_dir`, which creates it: a producer checking tasks makes no directory.
    return settings.data_dir.expanduser().resolve() / "logs" / executor


def _executor_options(settings: Settings, name: str) -> dict[str, Any]:
    """Constructor keywords of a built-in executor, from the settings."""
    logs = str(_log_dir(settings, name))
    if name == "spark":
        registry = importlib.import_module("scheduler.executors.registry")
        return {
            "master": settings.spark_master,
            "app_name": settings.spark_app_name,
            "conf": dict(settings.spark_conf),
            "jobs": registry.JobRegistry(
                allowed_prefixes=settings.spark_job_modules,
                prefixes_setting=env_name("spark_job_modules"),
            ),
        }
    if name == "spark-submit":
        return {"master": settings.spark_master, "conf": dict(settings.spark_conf), "log_dir": logs}
    if name == "command":
        return {"log_dir": logs}
    return {}


def _import_executor(path: str, setting: str) -> Executor:
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigurationError(
            f"{setting}: cannot import module {module_name!r} ({error}); check the module path "
            "and that the package is installed in this environment"
        ) from error
    target = getattr(module, attribute, None)
    if target is None:
        raise ConfigurationError(f"{setting}: module {module_name!r} has no {attribute!r}")
    if isinstance(target, type):
        target = target()
    if not callable(target):
        raise ConfigurationError(
            f"{setting} is a {type(target).__name__}, not a callable executor(task, context)"
        )
    executor: Executor = target
    return executor


def partition_count_check(
    log: TaskLog, store: TaskStore, partitions: int, *, create_topic: bool = True
) -> int:
    """Make sure the topic, the store and the settings agree on the partition count (a
    task's partition is `murmur2(ordering_id) % count`).

    Creates a missing topic (unless not `create_topic`: then it is a `ConfigurationError`) and
    pins the count in the store the first time, once both checks passed.
    """
    pinned = store.read_meta(PARTITION_COUNT_META)
    if pinned is not None and int(pinned) != partitions:
        # The store first: a mismatch must be refused before a topic is created with a wrong count.
        raise _pinned_elsewhere(log, int(pinned), partitions)
    topic_partition_check(log, partitions, pinned=pinned is not None, create=create_topic)
    store_partition_check(store, partitions)
    return partitions


def _pinned_elsewhere(log: TaskLog, pinned: int, partitions: int) -> PartitionCountMismatchError:
    """The refusal of a count that differs from the store's, with advice fitting the topic's."""
    count = env_name("partitions")
    held = (
        f"the task store is pinned to {pinned} partitions but {count}={partitions} (the first "
        f"worker that used the store had {pinned})"
    )
    try:
        actual: int | None = log.partition_count()
    except SchedulerError:  # no topic yet, or the log cannot say: the store decides
        actual = None
    if actual is None or actual == pinned:
        topic = "" if actual is None else f" (topic {log.topic!r} has {pinned} too)"
        return _pinned_to(pinned, partitions, topic)
    return PartitionCountMismatchError(
        f"{held}, and topic {log.topic!r} has {actual}: the store and the topic are not of one "
        f"deployment. Point {env_name('topic')} at the topic of this store's data (one of "
        f"{pinned} partitions) and set {count}={pinned}, or point the store at the topic's "
        f"(its data directory or keyspace) and set {count}={actual}"
    )


def new_store_check(log: TaskLog, store: TaskStore, settings: Settings) -> None:
    """Refuse a store no worker has used (no partition count pinned) for a group that has
    already read records of the topic: their tasks are in another store (a mistyped keyspace)."""
    if store.read_meta(PARTITION_COUNT_META) is not None:
        return
    try:
        lags = log.describe_group(settings.group_id)
    except ConfigurationError:  # no topic yet: nothing read
        return
    read = sum(lag.committed or 0 for lag in lags)
    if not read or store.read_meta(PARTITION_COUNT_META) is not None:
        # Asked again: a worker starting beside this one pins the count before it commits.
        return
    if settings.store == "cassandra":
        where = (
            f"keyspace {settings.cassandra_keyspace!r} ({env_name('cassandra_keyspace')}; "
            f"{env_name('cassandra_hosts')} names the cluster)"
        )
    else:
        where = f"{settings.data_dir.resolve() / EMBEDDED_STORE_FILE} ({env_name('data_dir')})"
    raise ConfigurationError(
        f"group {settings.group_id!r} has already read {read:,} record{'' if read == 1 else 's'} "
        f"of topic "
        f"{settings.topic!r} into a task store, but this one, {where}, is new: no worker has "
        "used it. The tasks of those records are in the store the group used before, and "
        "workers here would never run them. Check the setting against the other workers'. "
        f"To start this store on purpose, use a new group ({env_name('group_id')}): it reads "
        "the topic from its first record still kept, so the tasks of those records are stored "
        "again (those that had finished run again)"
    )


def store_partition_check(store: TaskStore, partitions: int, *, pin: bool = True) -> int:
    """The partition count the store is pinned to, pinned to `partitions` the first time (a
    lightweight transaction on Cassandra); refuse if it differs. Without `pin`, a store with no
    count pinned is left so and taken to agree."""
    if pin:
        stored = int(store.claim_meta(PARTITION_COUNT_META, str(partitions)))
    else:
        pinned = store.read_meta(PARTITION_COUNT_META)
        stored = partitions if pinned is None else int(pinned)
    if stored != partitions:
        raise _pinned_to(stored, partitions)
    return stored


def _pinned_to(pinned: int, partitions: int, topic: str = "") -> PartitionCountMismatchError:
    count = env_name("partitions")
    return PartitionCountMismatchError(
        f"the task store is pinned to {pinned} partitions but {count}={partitions} (the first "
        f"worker that used the store had {pinned}){topic}; set {count}={pinned}, or start over "
        "with an empty store (a new data directory or keyspace) and a new topic"
    )


def topic_partition_check(
    log: TaskLog, partitions: int, *, pinned: bool = False, create: bool = True
) -> int:
    """The topic's partition count, creating the topic if missing (if `create`, else refusing
    it); refuse if it differs. `pinned`: the store's data is known to be partitioned into
    `partitions`."""
    actual = log.ensure_topic(partitions) if create else log.partition_count()
    if actual == partitions:
        return actual
    topic, count = env_name("topic"), env_name("partitions")
    embedded_path = getattr(log, "path", None) if type(log).__name__ == "EmbeddedTaskLog" else None
    if embedded_path is not None:
        # No partitions are ever added to an embedded log: Kafka's advice does not apply.
        raise PartitionCountMismatchError(
            f"the embedded log {embedded_path} (topic {log.topic!r}) has {actual} partitions "
            f"but {count}={partitions}; an embedded log keeps the count it was made with, so "
            f"set {count}={actual}, or start over in a new data directory "
            f"({env_name('data_dir')}; the tasks of this one stay there)"
        )
    if not pinned:
        advice = (
            f"the count is fixed for the life of a topic, so set {count}={actual}, or use a new "
            f"topic ({topic}={log.topic}-{partitions}, say) with an empty store"
        )
        if actual > partitions:
            advice += f"; if partitions were added to it, {MOVE_ADVICE.format(count=partitions)}"
        raise PartitionCountMismatchError(
            f"topic {log.topic!r} has {actual} partitions but {count}={partitions}; {advice}"
        )
    if actual > partitions:
        advice = (
            f"if partitions were added to the topic, {MOVE_ADVICE.format(count=partitions)}; if "
            f"it is another deployment's topic, give this one its own "
            f"({topic}={log.topic}-{partitions}, say)"
        )
    else:
        advice = (
            "the count of a topic is fixed for its life: give this deployment its own topic "
            f"({topic}={log.topic}-{partitions}, say), or point it at the store of the "
            f"topic's own data and set {count}={actual}"
        )
    raise PartitionCountMismatchError(
        f"topic {log.topic!r} has {actual} partitions, but the task store is pinned to "
        f"{partitions} ({count}={partitions}); {advice}"
    )


MOVE_ADVICE = (
    "stop every worker and move the group's unread records to a new topic of {count} partitions "
    "with `scheduler topic move --to <new topic>`, then give producers and workers that topic "
    f"({env_name('topic')}); see 'Partitions added to the topic' in docs/kafka.md"
)
"""What to do about a topic that grew under stored data (Kafka cannot remove partitions)."""


def topic_changed_error(topic: str, actual: int, expected: int) -> PartitionCountMismatchError:
    """A running worker found its topic with `actual` partitions instead of `expected`."""
    how = (
        "partitions were added to it"
        if actual > expected
        else "it was deleted and created again with fewer"
    )
    return PartitionCountMismatchError(
        f"topic {topic!r} now has {actual} partitions, but its tasks are partitioned into "
        f"{expected}: {how}, so producers send many ordering ids to other partitions than their "
        "earlier tasks. This worker stops before storing a record the change routed elsewhere: "
        f"those records stay unread on the topic and no task is lost; "
        f"{MOVE_ADVICE.format(count=expected)}"
    )


def describe(settings: Settings) -> str:
    """Where this process keeps its tasks, in one line for the operator."""
    if settings.log == "kafka":
        log = f"kafka {settings.kafka_bootstrap} topic {settings.topic!r}"
    else:
        log = f"embedded log {settings.data_dir.resolve() / EMBEDDED_LOG_FILE}"
    if settings.store == "cassandra":
        hosts, port = cassandra_contact(settings)
        store = f"cassandra {','.join(hosts)}:{port} keyspace {settings.cassandra_keyspace!r}"
    else:
        store = f"sqlite store {settings.data_dir.resolve() / EMBEDDED_STORE_FILE}"
    return f"{log}, {store}, {settings.partitions} partitions"
