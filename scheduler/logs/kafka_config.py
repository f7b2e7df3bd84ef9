"""The librdkafka settings the Kafka task log runs with, and the errors it turns Kafka's into.

The settings that carry the design (idempotence, the Java-compatible partitioner, manual commits,
cooperative rebalancing) are read in one place. A caller's own `producer_config` /
`consumer_config` applies on top (batching, timeouts, security); keys that would break the
design's promises are refused at start (`refuse_reserved`).
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from scheduler.errors import BackendUnavailableError, ConfigurationError
from scheduler.logging_setup import OncePerMinute
from scheduler.services.process import port_open

logger = logging.getLogger("scheduler.logs.kafka")
"""librdkafka's own log lines go here instead of to stderr."""


class _WaitsLibrdkafkaRetries(logging.Filter):
    """Shows as DEBUG the WARNING lines librdkafka writes while a broker that has just started
    cannot hand out producer ids yet ("Coordinator load in progress: retrying"), a normal wait
    of a second or so: as INFO, "Failed to acquire idempotence PID" read as the failure of a
    short command (`schedules create`) that then succeeded. A wait that does not end still
    surfaces: the records' futures fail."""

    _RETRIED = ("Coordinator load in progress: retrying", "Coordinator not available: retrying")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING:
            message = record.getMessage()
            if "idempotence PID" in message and any(m in message for m in self._RETRIED):
                record.levelno, record.levelname = logging.DEBUG, "DEBUG"
                # The logger let it through as a WARNING; as DEBUG it must pass its level too.
                return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


class _RepeatsOncePerMinute(OncePerMinute):
    """Lets one of librdkafka's FAIL lines through per client, broker and reason a minute, and
    one of its "leader not found" lines per client and topic, with the count of those held back.

    A client whose brokers are away or refuse its login reconnects, and logs a FAIL line, every
    50 ms; while a broker restarts, a producer logs a line per partition on every metadata
    refresh. The client loses nothing meanwhile, so the line stays visible, once a minute.
    """

    _TIMING = re.compile(r" \(after \d+ms in state \w+\)")
    _PARTITION = re.compile(r"\[\d+\]: new leader-?\d+ not found in cache$")

    def key(self, record: logging.LogRecord) -> str | None:
        message = record.getMessage()
        if message.startswith("FAIL "):
            return self._TIMING.sub("", message)
        if message.startswith("METADATAUPDATE ") and self._PARTITION.search(message):
            return self._PARTITION.sub(": leader not found", message)
        return None


logger.addFilter(_WaitsLibrdkafkaRetries())
logger.addFilter(_RepeatsOncePerMinute())

BOOTSTRAP_SETTING = "SCHEDULER_KAFKA_BOOTSTRAP"
"""The environment variable (read by the service's settings) that names the brokers."""
CONNECT_TIMEOUT_SETTING = "SCHEDULER_KAFKA_CONNECT_TIMEOUT_S"
"""The environment variable of how long the check at start waits for the brokers."""

RECONNECT_DEFAULTS: dict[str, Any] = {
    # The cap of librdkafka's doubling wait between tries to reach a broker (its default 10 s,
    # the Java client's 1 s): a client would otherwise wait up to 10 s after a broker is back.
    "reconnect.backoff.max.ms": 1_000,
}

ADMIN_CLIENT_ID = "scheduler-admin"
PRODUCER_CLIENT_ID = "scheduler-producer"
"""Default `client.id`s, so that librdkafka's log lines say which of a worker's clients wrote
them (a consumer's id is the worker's; a caller's producer `client.id` names both)."""

PRODUCER_DEFAULTS: dict[str, Any] = {
    **RECONNECT_DEFAULTS,
    "client.id": PRODUCER_CLIENT_ID,
    # Durable before the future resolves, and no duplicates or reordering on retry.
    "enable.idempotence": True,
    "acks": "all",
    # Kafka's Java default for keyed records, so any client puts an ordering id on the
    # partition `scheduler.partitioning.partition_for` predicts (librdkafka's default is CRC32).
    "partitioner": "murmur2_random",
    # A few ms of batching multiplies throughput; firing precision is not affected by enqueueing.
    "linger.ms": 5,
    "compression.type": "lz4",
    # Never let a send create the topic: brokers with auto.create.topics.enable (Kafka's
    # default) would create it with their default partition count (often 1), and every worker
    # would then refuse it. The product creates its topic with the configured count instead.
    "allow.auto.create.topics": False,
    # The periodic metadata refresh stays at its default (5 min): a partition without a leader
    # is looked up every 100 ms anyway, and a refresh while a broker shuts down drops requests.
}

STATS_INTERVAL_MS = 1000
"""How often a client reports the statistics `BrokerWatch` reads (`statistics.interval.ms`): a
report costs a fraction of a millisecond, and an outage shows in the probes within a second."""

CONSUMER_DEFAULTS: dict[str, Any] = {
    **RECONNECT_DEFAULTS,
    # Offsets are committed by the worker only once the store holds the batch.
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    # Partitions that stay with a consumer are never revoked during a rebalance.
    "partition.assignment.strategy": "cooperative-sticky",
    # A dead worker's partitions move within ~10 s; a live one heartbeats every second.
    "session.timeout.ms": 10_000,
    "heartbeat.interval.ms": 1_000,
    "max.poll.interval.ms": 300_000,
    # Broker connection states for the probes' `problem` (kafka_brokers.py); 0 turns them off.
    "statistics.interval.ms": STATS_INTERVAL_MS,
}


CLASSIC_GROUP_ONLY = (
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
)
"""Consumer settings of Kafka's classic group protocol that librdkafka refuses under
`group.protocol=consumer` (KIP-848): the broker assigns partitions and times sessions there."""


def uses_consumer_protocol(config: Mapping[str, Any]) -> bool:
    """Whether a consumer configuration joins its group with KIP-848's `consumer` protocol."""
    return str(config.get("group.protocol", "classic")).strip().lower() == "consumer"


def consumer_defaults(user: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """`CONSUMER_DEFAULTS`, without the classic-only ones when the caller's own settings
    (`user`) choose the `consumer` group protocol; those the caller set stay, for librdkafka
    to refuse."""
    if not uses_consumer_protocol(user or {}):
        return CONSUMER_DEFAULTS
    return {k: v for k, v in CONSUMER_DEFAULTS.items() if k not in CLASSIC_GROUP_ONLY}


_ANY_CLIENT: dict[str, tuple[frozenset[str] | None, str]] = {
    "bootstrap.servers": (
        None,
        f"the brokers are {BOOTSTRAP_SETTING} (KafkaTaskLog's bootstrap_servers), which the "
        "error messages and the tools name",
    ),
}
"""Per librdkafka key a caller may not give: the values let through (None: none at all, the
key belongs to another setting), and why."""
_PRODUCERS = {
    **_ANY_CLIENT,
    "enable.idempotence": (
        frozenset({"true", "1"}),
        "without it a batch librdkafka retries may be written twice, or after a later batch, "
        "out of its ordering ids' order, and acks below all would be let through",
    ),
    "acks": (
        frozenset({"all", "-1"}),
        "a task's future would resolve before every in-sync replica had its record, and a "
        "leader that failed then would lose a task its producer saw accepted",
    ),
    "partitioner": (
        frozenset({"murmur2_random", "murmur2"}),
        "ordering ids would go to other partitions than Kafka's default partitioner (murmur2) "
        "puts them on, where `scheduler tasks show`, cancel and retry look for a task and "
        "where Java producers send the same ids; workers would warn of every such record",
    ),
}
_CONSUMERS = {
    **_ANY_CLIENT,
    "group.id": (None, "the workers' group is SCHEDULER_GROUP_ID, which `group status` reads too"),
    "client.id": (
        None,
        "it would give every worker one name, and `group status` could not tell their "
        "partitions apart; name each worker with SCHEDULER_CLIENT_ID, and the producers with "
        "SCHEDULER_KAFKA_PRODUCER_CONFIG=client.id=...",
    ),
    "enable.auto.commit": (
        frozenset({"false", "0"}),
        "workers commit offsets themselves, only once the store holds the records; committed "
        "earlier, a worker that died would lose them",
    ),
    "auto.offset.reset": (
        frozenset({"earliest", "smallest", "beginning"}),
        "a new group, or a partition whose committed offset retention removed, would start "
        "after the tasks already on the log and never run them",
    ),
}
_ALIASES = {"request.required.acks": "acks", "metadata.broker.list": "bootstrap.servers"}
"""librdkafka's other names for a key above (it also takes topic properties as `topic.<key>`)."""


def refuse_reserved(producer_config: Mapping[str, Any], consumer_config: Mapping[str, Any]) -> None:
    """Refuse the librdkafka keys that other settings own, and values that break a promise (the
    caller's keys win over the product's in `merged`; the rules above say why each matters)."""
    for given_as, config, rules in (
        ("producer_config", producer_config, _PRODUCERS),
        ("consumer_config", consumer_config, _CONSUMERS),
    ):
        # With a nested `default.topic.config` (confluent-kafka's older way to give topic
        # properties).
        nested = config.get("default.topic.config")
        pairs = [*config.items(), *(nested.items() if isinstance(nested, Mapping) else ())]
        for written, value in pairs:
            name = written.strip().removeprefix("topic.")
            rule = rules.get(_ALIASES.get(name, name))
            if rule is None:
                continue
            allowed, why = rule
            if allowed is None:
                setting = written
            elif str(value).strip().lower() not in allowed:
                setting = f"{written}={value}"
            else:
                continue
            raise ConfigurationError(
                f"{setting} cannot be set in {_given_in(given_as)}: {why}; remove it from there"
            )


def merged(
    base: Mapping[str, Any], fixed: Mapping[str, Any], user: Mapping[str, Any] | None
) -> dict[str, Any]:
    """`base` defaults, then `fixed` (connection, ids), then the caller's overrides."""
    config = {**base, **fixed, **(user or {})}
    config.setdefault("logger", logger)
    return config


def unavailable(
    what: str, error: KafkaError | Exception, bootstrap: str
) -> BackendUnavailableError:
    """A `BackendUnavailableError` that names the brokers and carries Kafka's own words."""
    text = error.str() if isinstance(error, KafkaError) else str(error)
    return BackendUnavailableError(f"{what} on Kafka at {bootstrap!r} failed: {text}")


def config_refused(client: str, exc: KafkaException, given_as: str) -> ConfigurationError:
    """librdkafka refused to build a `client` from its configuration: a key or value of the
    caller's own settings (`given_as`), since the defaults here are known good."""
    return ConfigurationError(
        f"librdkafka refused the Kafka {client} configuration: {reason(exc)}; fix the extra "
        f"settings in {_given_in(given_as)}, whose keys and values are librdkafka's: "
        "https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md"
    )


def _given_in(given_as: str) -> str:
    """Where a user gives a client's settings: `given_as` is KafkaTaskLog's argument."""
    kind = "CONSUMER" if given_as == "consumer_config" else "PRODUCER"
    return f"SCHEDULER_KAFKA_CONFIG or SCHEDULER_KAFKA_{kind}_CONFIG (KafkaTaskLog's {given_as})"


def reason(exc: BaseException) -> str:
    """librdkafka's words for a `KafkaException` (not its `KafkaError{code=...}` repr)."""
    error = kafka_error(exc)
    return error.str() if error is not None else str(exc)


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The `KafkaError` inside a `KafkaException`, if there is one."""
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], KafkaError) else None


def any_broker_listens(bootstrap: str, timeout: float = 2.0) -> bool:
    """Whether any address of a bootstrap list (`host:port,...`, a `PLAINTEXT://` prefix
    allowed) accepts a TCP connection: answered in seconds, where Kafka's tools wait 30 s."""
    return any(
        host and port.isdigit() and port_open(host.strip("[]"), int(port), timeout)
        for _, host, port in _addresses(bootstrap)
    )


def nothing_listens(bootstrap: str, timeout: float = 1.0) -> str | None:
    """Why no address of a bootstrap list can be a broker, when each one is refused at once (a
    closed port, a host name that does not resolve). None when any address takes a TCP
    connection or does not answer within `timeout`: waiting may help there."""
    reasons = []
    for address, host, port in _addresses(bootstrap):
        if not host or not port.isdigit():
            return None  # librdkafka's to judge
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return None
        except ConnectionRefusedError:
            reasons.append(f"connection to {address} refused: nothing listens on that port")
        except socket.gaierror as error:
            reasons.append(f"host {host!r} of {address} does not resolve ({error.strerror})")
        except OSError:
            return None  # a timeout, an unreachable network: it may yet answer
    return "; ".join(reasons) or None


def _addresses(bootstrap: str) -> list[tuple[str, str, str]]:
    """(address, host, port) of each address of a bootstrap list, without a `PLAINTEXT://`."""
    addresses = [address.strip().rpartition("://")[2] for address in bootstrap.split(",")]
    return [(address, *address.rpartition(":")[::2]) for address in addresses]
