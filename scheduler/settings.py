"""Every setting of the CLI and the service, in one flat model: type, default, docs, validation.

Library classes take typed arguments and never read files or the environment; this model says
what may be configured, and `scheduler.config.load_settings` reads it from a TOML file, then
`SCHEDULER_*` variables, then command-line options, each later source winning. Fields are flat
so that a setting has one name everywhere (`partitions`, `SCHEDULER_PARTITIONS`). Each field's
docstring is its description, from which `docs/configuration.md` is generated.
"""

from __future__ import annotations

import json
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from scheduler.engine.settings import EngineSettings, RetryPolicy
from scheduler.health import DEFAULT_HOST, DEFAULT_STALL_S

ENV_PREFIX = "SCHEDULER_"
BUILT_IN_EXECUTORS = ("auto", "noop", "spark", "command", "spark-submit")
CONSISTENCY_LEVELS: tuple[str, ...] = ("ONE", "TWO", "THREE", "QUORUM", "ALL")
CONSISTENCY_LEVELS += ("LOCAL_QUORUM", "EACH_QUORUM", "LOCAL_ONE")
"""The levels reads and writes may use. Not ANY (see `consistency_level`), nor the serial
levels, which apply to lightweight transactions only."""
_CALLABLE_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_CQL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
"""Kafka's rule for topic names (and not `.` or `..`); checked here so that a bad name is a
settings error before any broker is asked, and the embedded log keeps to it too."""

file_values: ContextVar[dict[str, Any] | None] = ContextVar("scheduler_settings_file", default=None)
"""Values read from the TOML file, handed to `Settings`' lowest-precedence source."""


def _none_if_empty(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
        return None
    return value


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",") if item.strip()]
        if not items:
            raise ValueError("no value given")
        return items
    return value


def _pairs(separator: str, *, text: bool = False) -> BeforeValidator:
    """Parse `a=1,b=2` (or `dc1:3,dc2:3`) or a JSON object from the environment; with `text`,
    numbers and booleans of a JSON object or TOML table become the strings librdkafka and Spark
    take (`{"linger.ms": 5}` as `linger.ms=5`, `true` as `true`)."""

    def parse(value: Any) -> Any:
        parsed = _parse_pairs(value, separator)
        return _as_text(parsed) if text else parsed

    return BeforeValidator(parse)


def _parse_pairs(value: Any, separator: str) -> Any:
    if not isinstance(value, str):
        return value
    if value.strip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"not valid JSON: {error}") from error
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, found, item_value = item.partition(separator)
        if not found or not name.strip():
            raise ValueError(f"{item!r} has no {separator!r}")
        pairs[name.strip()] = item_value.strip()
    return pairs


def _as_text(value: Any) -> Any:
    """A table's scalar values as text; anything else is left for the type check to refuse."""
    if not isinstance(value, dict):
        return value
    return {name: _scalar_text(item) for name, item in value.items()}


def _scalar_text(item: Any) -> Any:
    if isinstance(item, bool):  # before int: a bool is an int
        return "true" if item else "false"
    if isinstance(item, int | float):
        return str(item)
    return item


def _case(transform: str) -> BeforeValidator:
    return BeforeValidator(lambda v: getattr(v.strip(), transform)() if isinstance(v, str) else v)


EmptyIsNone = BeforeValidator(_none_if_empty)
EmptyOnlyIsNone = BeforeValidator(lambda v: None if v == "" else v)
"""For values where "none" may be meant literally (a password)."""
CommaList = Annotated[list[str], NoDecode, BeforeValidator(_comma_list)]
Port = Annotated[int, Field(ge=1, le=65535)]
Positive = Annotated[int, Field(ge=1)]


class Settings(BaseSettings):
    """The effective configuration of one CLI invocation or service process."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        case_sensitive=False,
        validate_default=True,
        use_attribute_docstrings=True,
    )

    # -- general ---------------------------------------------------------------------------
    log: Annotated[Literal["embedded", "kafka"], _case("lower")] = "embedded"
    """Task log: `embedded` (a SQLite file in the data dir, one machine) or `kafka`."""
    store: Annotated[Literal["sqlite", "cassandra"], _case("lower")] = "sqlite"
    """Task store: `sqlite` (a file in the data dir) or `cassandra`."""
    data_dir: Path = Path(".scheduler")
    """Directory of the embedded log and the SQLite store, created if missing; relative paths
    are relative to the working directory."""
    partitions: Annotated[int, Field(ge=1, le=10_000)] = 16
    """Partitions of the task topic. Fixed for the life of the topic and its stored data: a
    different value later is refused."""
    topic: Annotated[str, Field(min_length=1)] = "scheduler-tasks"
    """Name of the task topic."""
    group_id: Annotated[str, Field(min_length=1)] = "scheduler-workers"
    """Consumer group of the workers; workers sharing it split the partitions."""
    client_id: Annotated[str | None, EmptyIsNone] = None
    """Name of this worker in the group (default: host name and process id)."""
    create_schema: bool = True
    """Create the store's tables (and the Cassandra keyspace) on start if missing. Turn it off
    where the schema is managed with `scheduler schema apply`."""

    # -- engine ----------------------------------------------------------------------------
    executor: str = "auto"
    """What runs tasks: `auto` (each task's data names its executor in `"executor"`, default
    `spark`; a task with empty data runs nothing, see docs/cli.md), `spark` (PySpark jobs
    named in the task data), `command`, `spark-submit`, `noop` (runs nothing, for smoke tests)
    or your own `package.module:callable`."""
    pool_size: Positive = 8
    """Executor calls running at once in one worker."""
    max_in_flight: Positive = 2000
    """Tasks one partition holds in memory before it stops loading; bounds memory however large
    the backlog."""
    lookahead_ms: Annotated[int, Field(ge=0)] = 2000
    """How far ahead of now tasks are loaded from the store into memory."""
    load_interval_ms: Positive = 500
    """How often a partition tops up its in-memory tasks from the store."""
    poll_max_records: Positive = 5000
    """Log records taken per poll and persisted as one batch."""
    status_flush_ms: Annotated[int, Field(ge=0)] = 20
    """Status writes are batched for up to this long."""
    restart_backoff_s: Annotated[float, Field(ge=0)] = 1.0
    """Wait before restarting a partition whose actors failed."""
    task_timeout_s: Annotated[float | None, Field(gt=0), EmptyIsNone] = None
    """Cancel an attempt that runs longer than this many seconds; empty: no limit."""
    shutdown_deadline_s: Annotated[float, Field(ge=0)] = 30.0
    """On shutdown or revocation, how long running tasks may finish before they are cancelled."""
    retry_max_attempts: Positive = 5
    """Attempts in all, the first included; after the last failure the task is FAILED."""
    retry_base_delay_s: Annotated[float, Field(gt=0)] = 1.0
    """Delay before the first retry; doubled for each later one."""
    retry_max_delay_s: Annotated[float, Field(gt=0)] = 300.0
    """Longest delay between two attempts."""
    retry_jitter: Annotated[float, Field(ge=0, le=1)] = 0.2
    """Each delay is multiplied by a random factor in [1 - jitter, 1 + jitter]."""

    # -- producers and store ---------------------------------------------------------------
    grace_window_s: Annotated[float, Field(ge=0)] = 10.0
    """A task scheduled further in the past than this is rejected; within it, it runs at once."""
    max_data_bytes: Annotated[int, Field(ge=2, le=16 * 1024 * 1024)] = 262_144
    """Largest task data accepted, in bytes of JSON."""
    status_retention_s: Annotated[float, Field(gt=0)] = 7 * 86_400.0
    """How long the status rows of finished tasks are kept (FAILED ones included)."""
    bucket_ms: Annotated[int, Field(ge=1000)] = 3_600_000
    """Width of a schedule-row time bucket in milliseconds; keep it once data exists."""

    # -- kafka -----------------------------------------------------------------------------
    kafka_bootstrap: Annotated[str, Field(min_length=1)] = "127.0.0.1:9092"
    """Kafka brokers, `host:port[,host:port...]`."""
    kafka_replication_factor: Positive = 1
    """Replication factor of the task topic when the product creates it."""
    kafka_connect_timeout_s: Annotated[float, Field(gt=0)] = 10.0
    """How long a command or a worker waits at start for the brokers to answer before it
    reports Kafka unreachable. An address where nothing listens (the connection refused) fails
    at once whatever this says; the wait is for brokers that take the connection but answer
    slowly, or are starting."""
    kafka_config: Annotated[dict[str, str], NoDecode, _pairs("=", text=True)] = {}
    """Extra librdkafka settings for producers, consumers and the admin client (security,
    tuning) as `key=value,key=value`, JSON or a TOML table (numbers and booleans there are
    taken as written: `{"linger.ms": 5}`); they win over the product's defaults. A key or value
    librdkafka refuses fails at start with its reason, and so do keys other settings own
    (`bootstrap.servers`, `group.id`, a consumer's `client.id`) and values that would lose or
    misplace tasks (`enable.auto.commit=true`, `auto.offset.reset=latest`, `acks=1`,
    `enable.idempotence=false`, another `partitioner`; see docs/kafka.md, "Producing").
    `settings show` masks secrets: keys that contain `password`, `secret`, `token` or
    `credential`, key material (`ssl.key.pem`) and `sasl.oauthbearer.config`."""
    kafka_producer_config: Annotated[dict[str, str], NoDecode, _pairs("=", text=True)] = {}
    """librdkafka settings for producers (and the admin client) only, over `kafka_config`:
    producer-only properties such as `linger.ms` given to every client make each consumer log a
    warning that it ignores them."""
    kafka_consumer_config: Annotated[dict[str, str], NoDecode, _pairs("=", text=True)] = {}
    """librdkafka settings for the workers' consumers only, over `kafka_config` (for example
    `fetch.max.bytes`, or `group.protocol=consumer` for Kafka 4's KIP-848 group protocol,
    docs/kafka.md)."""

    # -- cassandra -------------------------------------------------------------------------
    cassandra_hosts: CommaList = ["127.0.0.1"]
    """Contact points, comma-separated; a `host:port` item overrides `cassandra_port` (all
    items must share one port)."""
    cassandra_port: Port = 9042
    """CQL native port."""
    cassandra_keyspace: str = "scheduler"
    """Keyspace of the scheduler's tables."""
    cassandra_replication_strategy: Literal["SimpleStrategy", "NetworkTopologyStrategy"] = (
        "SimpleStrategy"
    )
    """Replication of the keyspace the product creates: `SimpleStrategy` (one datacenter) or
    `NetworkTopologyStrategy` (several)."""
    cassandra_replication_factor: Positive = 1
    """Replicas with SimpleStrategy."""
    cassandra_datacenters: Annotated[dict[str, int], NoDecode, _pairs(":")] = {}
    """Replicas per datacenter with NetworkTopologyStrategy, as `dc1:3,dc2:3`, JSON or a TOML
    table."""
    cassandra_consistency: Annotated[str, _case("upper")] = "LOCAL_QUORUM"
    """Consistency level of reads and writes. Not ANY: Cassandra refuses reads at ANY, and a
    write at ANY needs no replica to have it (docs/cassandra.md, "Consistency")."""
    cassandra_local_dc: Annotated[str | None, EmptyIsNone] = None
    """The datacenter this process is in, for DC-aware routing (default: the first contact
    point's). A name the cluster does not have stops the store at start, naming the ones it
    has."""
    cassandra_read_slice_s: Annotated[float, Field(ge=0.001)] = 60.0
    """Widest span of scheduled time one read of the schedule table covers. A read scans every
    tombstone (row of a completed task) between its bounds, and Cassandra refuses one past
    `tombstone_failure_threshold` (100,000 by default); reads that cross more than this span
    (a new owner without a reload mark, `scheduler tasks list`) go in several. Lower it if one
    partition completes more than about 1,600 tasks a second."""
    cassandra_ordering_index: Annotated[bool | Literal["auto"], _case("lower")] = "auto"
    """A Storage-Attached Index on `ordering_id` of the schedule and status tables, so that a
    listing of one ordering id (`GET /api/v1/tasks?ordering_id=`, `scheduler tasks list
    --ordering-id`) reads that id's rows, not every row of its partition's buckets: at
    1,000,000 tasks a page's p99 646 -> 32 ms (docs/cassandra.md, "An index on ordering ids").
    "auto" (the default) creates it with the schema when the node runs Cassandra 5.0 or later,
    which has SAI; true creates it always (a 4.x node refuses it at start); false creates none
    (one made before is kept and used). Each schedule and status write updates it too."""
    cassandra_username: Annotated[str | None, EmptyOnlyIsNone] = None
    """Role to log in as, where the nodes check passwords (PasswordAuthenticator); set
    `cassandra_password` with it."""
    cassandra_password: Annotated[str | None, EmptyOnlyIsNone] = None
    """Password of `cassandra_username`. `settings show` masks it."""
    cassandra_tls: bool = False
    """Connect to the nodes over TLS (their client_encryption_options). Setting any
    `cassandra_tls_*_file` turns it on too."""
    cassandra_tls_ca_file: Annotated[Path | None, EmptyOnlyIsNone] = None
    """PEM certificates of the CAs that signed the nodes' certificates (default: the system's
    trusted CAs)."""
    cassandra_tls_cert_file: Annotated[Path | None, EmptyOnlyIsNone] = None
    """This client's certificate chain (PEM), for nodes that require client certificates
    (require_client_auth); set `cassandra_tls_key_file` with it."""
    cassandra_tls_key_file: Annotated[Path | None, EmptyOnlyIsNone] = None
    """The PEM private key of `cassandra_tls_cert_file`; if it is encrypted, set
    `cassandra_tls_key_password` too."""
    cassandra_tls_key_password: Annotated[str | None, EmptyOnlyIsNone] = None
    """Password of an encrypted `cassandra_tls_key_file`. `settings show` masks it."""
    cassandra_tls_check_hostname: bool = True
    """Require each node's certificate to name the address it is reached at: the IP address it
    advertises (rpc_address), since the driver resolves host names and connects by address."""

    # -- spark -----------------------------------------------------------------------------
    spark_master: Annotated[str, Field(min_length=1)] = "local[*]"
    """Spark master URL: `local[*]`, `spark://host:7077`, `yarn`, `k8s://https://host:443`."""
    spark_app_name: Annotated[str, Field(min_length=1)] = "scheduler"
    """Spark application name."""
    spark_conf: Annotated[dict[str, str], NoDecode, _pairs("=", text=True)] = {}
    """Extra Spark configuration as `key=value,key=value`, JSON or a TOML table. A key set here
    wins over the session's defaults (with a local master, `spark.sql.shuffle.partitions` is its
    core count; see docs/spark.md). `settings show` masks secrets, as in `kafka_config`
    (`fs.s3a.secret.key`, `fs.azure.account.key.*`)."""
    spark_job_modules: CommaList = ["scheduler.examples"]
    """Packages whose `module:function` jobs a task may name without registering them first."""

    # -- programs and runs -----------------------------------------------------------------
    programs_file: Annotated[Path | None, EmptyOnlyIsNone] = None
    """TOML or JSON file declaring the programs runs are made of (docs/programs-and-runs.md).
    Workers with the `auto` executor run programs (the `workflow` route) and read the events
    topic only when it is set."""
    run_retention_s: Annotated[float, Field(gt=0)] = 30 * 86_400.0
    """How long a run record is kept after its last change."""
    events_subscriber: bool = True
    """Whether workers read the events topic (`<topic>-events`) and hand events to the
    registered handlers (the schedules)."""
    batch_file: Annotated[Path | None, EmptyOnlyIsNone] = None
    """The batch jobs' JSON configuration file (docs/batch-jobs.md). Workers poll it every
    `new_configuration_polling_time` of the configuration in force: a valid file is applied and
    renamed `<file>_IMPORTED`, an invalid one is logged and left in place. Only workers with
    the `auto` executor and this setting run batch jobs, those loaded with `scheduler jobs load`
    included (the file need not exist)."""
    batch_name: str = "default"
    """The name the batch configuration is stored under; its tasks run in queue
    `batch:<name>`."""
    batch_poll_s: Annotated[float, Field(gt=0)] = 120.0
    """How often the batch file is polled before any configuration is in force (the seed's
    default `new_configuration_polling_time` of 2 minutes)."""

    # -- observability ---------------------------------------------------------------------
    log_level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], _case("upper")
    ] = "INFO"
    """Least severe level of the log lines written (to stderr)."""
    task_log_level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], _case("upper")
    ] = "INFO"
    """Least severe level of the worker's line per finished task attempt and per ended run of
    a program (loggers `scheduler.tasks` and `scheduler.tasks.runs`; `log_level` still
    applies): INFO writes one for every attempt and run, WARNING only failures. A line costs
    the worker some 30 µs, which halves the rate of a worker running thousands of tiny tasks a
    second; such a fleet sets WARNING."""
    log_format: Annotated[Literal["text", "json"], _case("lower")] = "text"
    """Log lines as readable `text` or `json` (one object a line, for log shippers)."""
    metrics_port: Annotated[Port | None, EmptyIsNone] = None
    """Serve Prometheus metrics (`/metrics`) and health probes (`/healthz`, `/readyz`) on this
    port (`scheduler worker` only); empty: off."""
    metrics_host: Annotated[str, Field(min_length=1)] = DEFAULT_HOST
    """Address the metrics port listens on: `0.0.0.0` (every interface, so that Prometheus and
    an orchestrator's probes reach it from other hosts), `127.0.0.1` for this host only, or the
    address of one interface."""
    health_stall_s: Annotated[float, Field(gt=0)] = DEFAULT_STALL_S
    """`/healthz` fails once the worker's poll loop has not turned for this many seconds (a stuck
    worker; Kafka's `max.poll.interval.ms`, 300 s by default, is the same silence)."""

    # -- REST API and dashboard (`scheduler api`) ---------------------------------------------
    api_host: Annotated[str, Field(min_length=1)] = "127.0.0.1"
    """Address `scheduler api` listens on; 0.0.0.0 for every interface (give it TLS then)."""
    api_port: Port = 8080
    """Port `scheduler api` listens on."""
    api_tokens_file: Annotated[Path | None, EmptyIsNone] = None
    """File of the API's bearer tokens (their SHA-256 hashes and roles, never the tokens), written
    by `scheduler api tokens create`; empty: `api-tokens.json` in the data dir."""
    api_tls_cert: Annotated[Path | None, EmptyIsNone] = None
    """PEM certificate chain: `scheduler api` serves HTTPS with it (and `api_tls_key`)."""
    api_tls_key: Annotated[Path | None, EmptyIsNone] = None
    """PEM private key of `api_tls_cert`."""
    worker_api: bool = False
    """`scheduler worker` serves the REST API and the dashboard too, on `api_host`:`api_port`
    (as `scheduler api` would, in a thread of the worker's process): one process less on a
    single machine. Several workers of one host need a port each."""

    @field_validator("cassandra_consistency")
    @classmethod
    def _consistency(cls, value: str) -> str:
        if value == "ANY":
            from scheduler.stores._cassandra_session import ANY_REFUSED  # the driver: only here

            raise ValueError(ANY_REFUSED)
        if value not in CONSISTENCY_LEVELS:
            raise ValueError("unknown consistency level")
        return value

    @field_validator("topic")
    @classmethod
    def _topic(cls, value: str) -> str:
        if not _TOPIC_NAME.match(value) or value in (".", ".."):
            raise ValueError("not a valid Kafka topic name")
        return value

    @field_validator("cassandra_keyspace")
    @classmethod
    def _keyspace(cls, value: str) -> str:
        if not _CQL_NAME.match(value):
            raise ValueError("not a valid keyspace name")
        return value

    @field_validator("executor")
    @classmethod
    def _executor(cls, value: str) -> str:
        value = value.strip()
        if value not in BUILT_IN_EXECUTORS and not _CALLABLE_PATH.match(value):
            raise ValueError("neither a built-in executor nor a 'package.module:callable' path")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.retry_max_delay_s < self.retry_base_delay_s:
            raise ValueError(
                f"{env_name('retry_max_delay_s')}={self.retry_max_delay_s} is below "
                f"{env_name('retry_base_delay_s')}={self.retry_base_delay_s}; raise the maximum "
                "or lower the base delay"
            )
        for given, missing in (
            ("cassandra_username", "cassandra_password"),
            ("cassandra_password", "cassandra_username"),
            ("cassandra_tls_cert_file", "cassandra_tls_key_file"),
            ("cassandra_tls_key_file", "cassandra_tls_cert_file"),
            ("cassandra_tls_key_password", "cassandra_tls_key_file"),
        ):
            if getattr(self, given) is not None and getattr(self, missing) is None:
                raise ValueError(
                    f"{env_name(given)} is set but {env_name(missing)} is not; set both, or neither"
                )
        nts = self.cassandra_replication_strategy == "NetworkTopologyStrategy"
        if nts and not self.cassandra_datacenters:
            raise ValueError(
                f"{env_name('cassandra_replication_strategy')}=NetworkTopologyStrategy needs "
                f"{env_name('cassandra_datacenters')}, for example dc1:3,dc2:3"
            )
        if not nts and self.cassandra_datacenters:
            raise ValueError(
                f"{env_name('cassandra_datacenters')} is only used with NetworkTopologyStrategy;"
                f" set {env_name('cassandra_replication_strategy')}=NetworkTopologyStrategy or "
                "remove the datacenters"
            )
        return self

    @property
    def cassandra_tls_on(self) -> bool:
        """TLS to Cassandra: asked for, or implied by a certificate file."""
        files = (self.cassandra_tls_ca_file, self.cassandra_tls_cert_file)
        return self.cassandra_tls or any(path is not None for path in files)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Command line (init arguments) over environment over the TOML file; no .env files."""
        return init_settings, env_settings, _FileSource(settings_cls)

    def engine_settings(self) -> EngineSettings:
        """The engine's constructor settings."""
        return EngineSettings(
            pool_size=self.pool_size,
            max_in_flight_per_partition=self.max_in_flight,
            lookahead_ms=self.lookahead_ms,
            load_interval_ms=self.load_interval_ms,
            retry=RetryPolicy(
                max_attempts=self.retry_max_attempts,
                base_delay_s=self.retry_base_delay_s,
                max_delay_s=self.retry_max_delay_s,
                jitter=self.retry_jitter,
            ),
            task_timeout_s=self.task_timeout_s,
            shutdown_deadline_s=self.shutdown_deadline_s,
            poll_max_records=self.poll_max_records,
            status_flush_ms=self.status_flush_ms,
            restart_backoff_s=self.restart_backoff_s,
        )


class _FileSource(PydanticBaseSettingsSource):
    """The values read from the TOML file: the lowest precedence above the defaults."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return (file_values.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(file_values.get() or {})


def env_name(field: str) -> str:
    """The environment variable of a setting: `partitions` -> `SCHEDULER_PARTITIONS`."""
    return ENV_PREFIX + field.upper()
