"""The task log on Apache Kafka (confluent-kafka / librdkafka). See docs/kafka.md.

Producers and consumers are in `kafka_producer.py` and `kafka_consumer.py`, configured in
`kafka_config.py`. This module owns what is shared and administrative: the reachability check at
start, the topic, and the group's offsets and owners for the admin view. The embedded mode never
imports these modules, so it never loads confluent-kafka.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from logging.handlers import BufferingHandler
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic, OffsetSpec

from scheduler.errors import (
    BackendUnavailableError,
    ConfigurationError,
    SchedulerError,
    TopicMissingError,
)
from scheduler.logs.abc import LogConsumer, LogProducer, PartitionLag, TaskLog
from scheduler.logs.kafka_committed import OFFSETS_CLIENT_ID, CommittedOffsets
from scheduler.logs.kafka_config import (
    ADMIN_CLIENT_ID,
    BOOTSTRAP_SETTING,
    CONNECT_TIMEOUT_SETTING,
    PRODUCER_DEFAULTS,
    RECONNECT_DEFAULTS,
    any_broker_listens,
    config_refused,
    consumer_defaults,
    kafka_error,
    logger,
    merged,
    nothing_listens,
    reason,
    refuse_reserved,
    unavailable,
)
from scheduler.logs.kafka_consumer import COORDINATOR_MOVING, KafkaLogConsumer
from scheduler.logs.kafka_producer import KafkaLogProducer
from scheduler.logs.kafka_security import ACL_DOCS, RefusalRecorder, logs_in, not_allowed, principal
from scheduler.logs.kafka_topic_id import committed_elsewhere, known, untagged

__all__ = ["KafkaLogConsumer", "KafkaLogProducer", "KafkaTaskLog"]

_T = TypeVar("_T")

_METADATA_RETRY_S = 0.1
_LOGIN_CHECK_S = 0.5
"""How often the reachability check looks whether the brokers refused the login: a refusal
arrives within a second, and says more than the timeout that would follow it."""
_LEADERS_SETTLING = frozenset({KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART})
"""What brokers answer about a topic created (or a leader moved) moments ago; with
NOT_LEADER_FOR_PARTITION, which `_METADATA_STALE` holds."""
_METADATA_STALE = frozenset(
    {
        KafkaError._NOENT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
    }
)
"""What a long-lived admin client is answered after a broker restart until it refreshes its
metadata (by itself only every 5 minutes): no leader known, then its leader epochs fenced."""

_CREATE_REFUSALS = {
    KafkaError.INVALID_REPLICATION_FACTOR: "set SCHEDULER_KAFKA_REPLICATION_FACTOR to at most "
    "the number of brokers (1 for the one broker of `scheduler services up`, 3 in production)",
    KafkaError.INVALID_PARTITIONS: "check SCHEDULER_PARTITIONS against the brokers' limits",
    KafkaError.TOPIC_EXCEPTION: "set SCHEDULER_TOPIC to a name the brokers accept",
    KafkaError.POLICY_VIOLATION: "the brokers' topic creation policy decides what may be "
    "created; change the settings it names, or have an operator create the topic "
    "(`scheduler topic create` with an admin's settings)",
}
"""Topic creations the brokers refuse for the request itself, per error, with what to change:
another try gets the same answer, so these are configuration errors, not Kafka unavailable."""


def _telling(failures: list[str]) -> str:
    """The connection failure that says most of why, of those librdkafka logged: the first that
    names a failed handshake, else the first.

    librdkafka may log one hang-up twice, as the bare disconnection its socket saw
    ("Disconnected: SSL connection closed by peer") and as the handshake that broke ("SSL
    handshake failed: ...: connecting to a PLAINTEXT broker listener?"), in either order."""
    return next((failure for failure in failures if "handshake failed" in failure), failures[0])


class KafkaTaskLog(TaskLog):
    """One Kafka topic as the task log.

    Construction asks the brokers for metadata, so a wrong or unstarted broker fails here, with
    a message that says how to fix it, rather than as a hang in the first send or poll.
    """

    def __init__(
        self,
        *,
        bootstrap_servers: str,
        topic: str = "scheduler-tasks",
        replication_factor: int = 1,
        producer_config: Mapping[str, Any] | None = None,
        consumer_config: Mapping[str, Any] | None = None,
        request_timeout_s: float = 10,
        connect_timeout_s: float | None = None,
    ) -> None:
        self.topic = topic
        self._bootstrap = bootstrap_servers
        self._replication_factor = replication_factor
        self._producer_config = dict(producer_config or {})
        self._consumer_config = dict(consumer_config or {})
        self._timeout = request_timeout_s
        self._connect_timeout = (
            request_timeout_s if connect_timeout_s is None else connect_timeout_s
        )
        """How long the check at construction waits for the brokers (setting
        `kafka_connect_timeout_s`); an address refused at once fails at once."""
        refuse_reserved(self._producer_config, self._consumer_config)
        # The admin client (a producer underneath) takes the producer settings: a secured
        # cluster admits no client without them, and a wrong one fails here.
        self._refusals = RefusalRecorder(bootstrap_servers, self._producer_config)
        self._offsets = CommittedOffsets(self._offsets_settings, request_timeout_s=self._timeout)
        try:
            self._admin = AdminClient(self.admin_settings())
        except KafkaException as exc:
            raise config_refused("admin client", exc, "producer_config") from None
        try:
            self._check_reachable()
        except BaseException:
            # AdminClient has no close: it stops when its last reference goes, and the error's
            # traceback holds this half-built log.
            del self._admin
            raise

    def admin_settings(self) -> dict[str, Any]:
        """The librdkafka configuration of this log's admin client (defaults, then the
        caller's producer settings)."""
        return merged(
            {"error_cb": self._refusals, **RECONNECT_DEFAULTS, "client.id": ADMIN_CLIENT_ID},
            {"bootstrap.servers": self._bootstrap},
            self._producer_config,
        )

    # -- clients -----------------------------------------------------------------------------

    def producer(self) -> LogProducer:
        producer = KafkaLogProducer(
            config=self.producer_settings(), topic=self.topic, serve_also=self.serve
        )
        try:
            # Refused here, as on the embedded log: records sent to a missing topic would wait
            # for it and then fail one by one (a producer never creates it, see
            # PRODUCER_DEFAULTS).
            self.partition_count()
        except Exception:
            producer.close()
            raise
        return producer

    def producer_settings(self) -> dict[str, Any]:
        """The librdkafka configuration of this log's producers (defaults, then the caller's)."""
        return merged(
            PRODUCER_DEFAULTS, {"bootstrap.servers": self._bootstrap}, self._producer_config
        )

    def consumer(self, group_id: str, *, client_id: str) -> LogConsumer:
        config = self.consumer_settings(group_id, client_id=client_id)
        return KafkaLogConsumer(
            config=config, topic=self.topic, request_timeout_s=self._timeout, topic_id=self.topic_id
        )

    def consumer_settings(self, group_id: str, *, client_id: str) -> dict[str, Any]:
        """The librdkafka configuration of this log's consumers in `group_id`."""
        fixed = {"bootstrap.servers": self._bootstrap, "group.id": group_id, "client.id": client_id}
        return merged(consumer_defaults(self._consumer_config), fixed, self._consumer_config)

    def _offsets_settings(self, group_id: str) -> dict[str, Any]:
        """The librdkafka configuration of the idle consumer that reads `group_id`'s offsets."""
        config = self.consumer_settings(group_id, client_id=OFFSETS_CLIENT_ID)
        # No statistics: nobody reads them, and unpolled they would pile up in its queue.
        return {**config, "statistics.interval.ms": 0, "error_cb": self._refusals}

    def serve(self) -> None:
        # librdkafka queues a client's log lines until the client is polled (confluent-kafka
        # forwards them to `logger` then), and nothing else polls the admin client.
        self._admin.poll(0)
        self._offsets.serve()

    def close(self) -> None:
        self.serve()  # AdminClient has no close; this releases its last queued lines
        self._offsets.close()

    # -- the topic ---------------------------------------------------------------------------

    def ensure_topic(self, partitions: int) -> int:
        # Only a missing topic is created: a user whom the ACLs allow to use the topic but not
        # to create topics is refused by a create request even for a topic that exists.
        if self.topic not in self._metadata().topics:
            self._create_topic(partitions)
        # Creation is asynchronous on the brokers: wait until every partition has a leader, so
        # that the first send and the first fetch do not race the controller.
        return self._wait_for_leaders()

    def _create_topic(self, partitions: int) -> None:
        new = NewTopic(
            self.topic, num_partitions=partitions, replication_factor=self._replication_factor
        )
        future = self._admin.create_topics(
            [new], operation_timeout=self._timeout, request_timeout=self._timeout
        )[self.topic]
        try:
            future.result()
        except KafkaException as exc:
            error = kafka_error(exc)
            if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return  # another worker or client created it meanwhile
            if error is not None and error.code() in _CREATE_REFUSALS:
                raise ConfigurationError(
                    f"Kafka at {self._bootstrap!r} refused to create topic {self.topic!r} with "
                    f"{partitions} partitions and replication factor "
                    f"{self._replication_factor}: {error.str().rstrip('.')}; "
                    f"{_CREATE_REFUSALS[error.code()]}"
                ) from None
            raise self._failure(
                f"creating topic {self.topic!r}",
                exc,
                action=f"create topic {self.topic!r}",
                acl=("Create", f"--topic {self.topic}"),
                alternative="Or an operator creates the topic with the deployment's partition "
                "count (`scheduler topic create` with an admin's settings) before the "
                "scheduler starts: it creates only a missing topic. If it exists already, "
                "this user may not Describe it (brokers answer as if it did not exist): grant "
                f"`--operation Describe --topic {self.topic}` too.",
            ) from exc

    def partition_count(self) -> int:
        topic = self._metadata().topics.get(self.topic)
        if topic is None or topic.error is not None:
            raise self._missing()
        return len(topic.partitions)

    @property
    def location(self) -> str:
        return f"topic {self.topic!r} on Kafka at {self._bootstrap!r}"

    def topic_id(self) -> str | None:
        # Asked by name, unlike `_metadata`: DescribeTopics never creates a topic.
        future = self._admin.describe_topics(
            TopicCollection([self.topic]), request_timeout=self._timeout
        )[self.topic]
        try:
            return known(str(future.result().topic_id))
        except KafkaException as exc:
            error = kafka_error(exc)
            if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise self._missing() from None
            raise unavailable(f"describing topic {self.topic!r}", exc, self._bootstrap) from exc

    def _missing(self) -> TopicMissingError:
        # Brokers list only the topics the user may describe: with ACLs, "missing" may be
        # "hidden", and creating it would then be refused for a reason that says little.
        hidden = (
            f". With ACLs, a topic {principal(self._producer_config)} may not Describe is "
            f"missing from the list the brokers answer with; {ACL_DOCS} lists the ACLs"
        )
        return TopicMissingError(
            f"Kafka topic {self.topic!r} does not exist on {self._bootstrap!r}; create it "
            "with the deployment's partition count first: `scheduler topic create` (workers "
            "and `scheduler enqueue` do too, with SCHEDULER_PARTITIONS), or "
            "`KafkaTaskLog.ensure_topic(partitions)`"
            + (hidden if logs_in(self._producer_config) else "")
        )

    def delete_topic(self) -> None:
        """Delete the topic and everything in it (for tests; there is no undo)."""
        future = self._admin.delete_topics(
            [self.topic], operation_timeout=self._timeout, request_timeout=self._timeout
        )[self.topic]
        try:
            future.result()
        except KafkaException as exc:
            error = kafka_error(exc)
            if error is None or error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise unavailable(f"deleting topic {self.topic!r}", exc, self._bootstrap) from exc

    # -- the group ---------------------------------------------------------------------------

    def describe_group(
        self, group_id: str, partitions: Collection[int] | None = None
    ) -> list[PartitionLag]:
        # Given partitions spare the metadata request for the count, which lists every topic of
        # the cluster (see `_metadata`): the lag metric asks on every scrape.
        numbers = range(self.partition_count()) if partitions is None else sorted(partitions)
        wanted = [TopicPartition(self.topic, p) for p in numbers]
        if not wanted:
            return []
        committed = self._committed(group_id, wanted)
        owners = self._owners(group_id)
        ends = self._list_offsets(wanted, OffsetSpec.latest(), "reading end offsets")
        return [
            PartitionLag(p, offset, ends[p], owners.get(p), note)
            for p in numbers
            for offset, note in [committed.get(p, (None, ""))]
        ]

    def _committed(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> dict[int, tuple[int, str]]:
        """Committed offsets and their metadata; partitions without a commit are absent.

        Asked through a consumer of the group, not the admin client: see `kafka_committed`."""
        result = self._retrying(
            lambda: self._offsets.read(group_id, partitions),
            f"reading offsets of group {group_id!r}",
            action=f"read the committed offsets of group {group_id!r}",
            acl=("Describe", f"--group {group_id}"),
            settling=COORDINATOR_MOVING,  # the admin client passes these on without retrying
        )
        try:
            topic_id = self.topic_id()
        except SchedulerError as error:
            # Then commits on a deleted topic of the same name pass for this one's, as they
            # would without IDs.
            logger.debug("cannot read the ID of topic %r: %s", self.topic, error)
            topic_id = None
        return {
            tp.partition: (tp.offset, untagged(tp.metadata or "")[1])
            for tp in result
            if tp.topic == self.topic
            and tp.error is None
            and tp.offset >= 0
            # A commit on a deleted topic of the same name is none for this one.
            and committed_elsewhere(tp.metadata or "", topic_id) is None
        }

    def _owners(self, group_id: str) -> dict[int, str]:
        description = self._retrying(
            lambda: self._admin.describe_consumer_groups([group_id], request_timeout=self._timeout)[
                group_id
            ].result(timeout=self._timeout + 1),
            f"describing group {group_id!r}",
            action=f"describe consumer group {group_id!r}",
            acl=("Describe", f"--group {group_id}"),
            settling=COORDINATOR_MOVING,  # the admin client passes these on without retrying
            renew_on_timeout=True,
        )
        owners: dict[int, str] = {}
        for member in description.members or []:
            for tp in member.assignment.topic_partitions or []:
                if tp.topic == self.topic:
                    owners[tp.partition] = member.client_id
        return owners

    def first_offsets(self, partitions: Collection[int]) -> dict[int, int]:
        wanted = [TopicPartition(self.topic, p) for p in partitions]
        return self._list_offsets(wanted, OffsetSpec.earliest(), "reading log start offsets")

    def _list_offsets(
        self, partitions: list[TopicPartition], spec: OffsetSpec, what: str
    ) -> dict[int, int]:
        if not partitions:
            return {}
        return self._retrying(
            lambda: {
                tp.partition: int(f.result().offset)
                for tp, f in self._admin.list_offsets(
                    {tp: spec for tp in partitions}, request_timeout=self._timeout
                ).items()
            },
            what,
            action=f"read the offsets of topic {self.topic!r}",
            acl=("Describe", f"--topic {self.topic}"),
            # A topic created moments ago: its leaders may not answer for it yet. A broker
            # restarted: what this client knows of the leaders is stale, so ask anew.
            settling=_LEADERS_SETTLING | _METADATA_STALE,
        )

    # -- plumbing ----------------------------------------------------------------------------

    def _check_reachable(self) -> None:
        deadline = time.monotonic() + self._connect_timeout
        failures: list[str] = []
        looked = False
        while True:
            remaining = deadline - time.monotonic()
            try:
                self._admin.list_topics(timeout=max(0.01, min(_LOGIN_CHECK_S, remaining)))
                return
            except KafkaException as exc:
                why = reason(exc)
            # Raised out here: raised inside `except`, an error would keep librdkafka's as its
            # context, whose traceback holds the admin client (see `__init__`).
            failures += self._connection_failures()  # also runs the refusal recorder
            if self._refusals.first is not None:
                raise self._refusals.first
            refused = None if looked else nothing_listens(self._bootstrap)
            looked = True
            if refused is not None:
                # librdkafka would try again until the deadline, but a closed port or an
                # unknown host does not open in the meantime (`scheduler services up` waits
                # for its broker before it returns).
                raise BackendUnavailableError(
                    f"cannot reach Kafka at {self._bootstrap!r}: {refused}. Point "
                    f"{BOOTSTRAP_SETTING} at a running broker's listener (host:port, such as "
                    "127.0.0.1:9092 for the broker of `scheduler services up`), or run "
                    "`scheduler services up` to start a local one."
                )
            if time.monotonic() < deadline:
                time.sleep(_METADATA_RETRY_S)  # all brokers down: list_topics fails at once
                continue
            if failures:
                why = f"{why}; connection failure: {_telling(failures)}"
            raise BackendUnavailableError(
                f"cannot reach Kafka at {self._bootstrap!r} within {self._connect_timeout:g} s "
                f"({CONNECT_TIMEOUT_SETTING}={self._connect_timeout:g}; {why}). Point "
                f"{BOOTSTRAP_SETTING} at a running broker, or run `scheduler services up` to "
                "start a local one; for brokers that answer slowly, wait longer with "
                f"{CONNECT_TIMEOUT_SETTING}={max(30, 3 * self._connect_timeout):g}."
                + self._security_hint(failures)
            )

    def _security_hint(self, failures: list[str]) -> str:
        # A listener that wants TLS or a login hangs up on a plaintext client's first request
        # (and a plaintext one on a TLS client's handshake): the state says it was no outage.
        mismatch = any(
            f"in state {state})" in failure
            for failure in failures
            for state in ("APIVERSION_QUERY", "SSL_HANDSHAKE", "AUTH_HANDSHAKE")
        )
        if any("Invalid response size" in failure for failure in failures):
            # librdkafka suggests raising receive.message.max.bytes; the answer it could not
            # size was no Kafka response at all.
            return (
                " Whatever answers there does not speak Kafka's protocol in plain text: another "
                "service on that port (Cassandra's is 9042, Kafka's usually 9092), or a TLS "
                "listener (set security.protocol in SCHEDULER_KAFKA_CONFIG); raising "
                "receive.message.max.bytes, as librdkafka suggests, will not help."
            )
        # librdkafka logs the silence only when its own 10 s wait ends, which may come after
        # ours: with nothing logged, a port that takes connections was silent too.
        # A connection whose first request (ApiVersion) timed out, as librdkafka words it.
        silent = any(
            "in state APIVERSION_QUERY)" in failure and "Timed out" in failure
            for failure in failures
        ) or (not failures and any_broker_listens(self._bootstrap))
        if silent:
            # A TLS or SASL listener would have hung up on the plain request, not kept quiet.
            return (
                " It took the connection but never answered Kafka's first request: another kind "
                "of server listens there (one that waits for its own protocol, as HTTP servers "
                f"do), or the broker hangs. Point {BOOTSTRAP_SETTING} at a broker's listener "
                "(9092 unless its server.properties says otherwise), or read the broker's log."
            )
        if self._producer_config:
            return " If it is running, check the security settings in SCHEDULER_KAFKA_CONFIG."
        if mismatch:
            return (
                " If it is running, it hung up at the first request: its listener may want TLS "
                "or a login (security.protocol and the rest in SCHEDULER_KAFKA_CONFIG)."
            )
        return ""

    def _connection_failures(self) -> list[str]:
        """Why librdkafka's connections failed, from its queued log lines, taken instead of
        logged: a TLS or SASL mismatch fails every few milliseconds, and the error says it once."""
        keep = BufferingHandler(capacity=1 << 20)
        propagate, logger.propagate = logger.propagate, False
        # librdkafka logs a closed connection at INFO: seen even where the log shows WARNINGs.
        level = logger.level
        logger.setLevel(min(logging.INFO, logger.getEffectiveLevel()))
        logger.addHandler(keep)
        try:
            self._admin.poll(0)
        finally:
            logger.removeHandler(keep)
            logger.setLevel(level)
            logger.propagate = propagate
        lines = [record.getMessage() for record in keep.buffer]
        # "FAIL [rdkafka#producer-1] [thrd:...]: ssl://host:9092/bootstrap: SSL handshake failed"
        return [line.split("]: ", 1)[-1] for line in lines if line.startswith("FAIL ")]

    def _metadata(self) -> ClusterMetadata:
        try:
            # All topics, not just ours: asking for one by name can auto-create it on brokers
            # with auto.create.topics.enable, with the broker's default partition count.
            return self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise unavailable("reading metadata", exc, self._bootstrap) from exc

    def _wait_for_leaders(self) -> int:
        deadline = time.monotonic() + self._timeout
        while True:
            topic = self._metadata().topics.get(self.topic)
            ready = (
                topic is not None
                and topic.error is None
                and topic.partitions
                and all(p.leader >= 0 and p.error is None for p in topic.partitions.values())
            )
            if ready and topic is not None:
                return len(topic.partitions)
            if time.monotonic() > deadline:
                if topic is not None and topic.partitions:
                    logger.warning(
                        "topic %r exists but not every partition has a leader yet", self.topic
                    )
                    return len(topic.partitions)
                raise BackendUnavailableError(
                    f"topic {self.topic!r} did not appear on {self._bootstrap!r} within "
                    f"{self._timeout:g} s of creating it"
                )
            time.sleep(_METADATA_RETRY_S)

    def _retrying(
        self,
        request: Callable[[], _T],
        what: str,
        *,
        action: str,
        acl: tuple[str, str],
        settling: frozenset[int],
        renew_on_timeout: bool = False,
    ) -> _T:
        """`request()`, made again while the brokers answer with an error of `settling`, for up
        to the request timeout.

        With `renew_on_timeout`, a request that timed out is made once more with a new admin
        client: librdkafka keeps a broker that a metadata response left out (one that answered
        while it shut down) as a group's coordinator and never looks it up again (librdkafka
        issue 5511), so after a broker restart a long-lived admin client's group requests time
        out for good, while a new client is answered at once."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return request()
            except KafkaException as exc:
                code = None if (error := kafka_error(exc)) is None else error.code()
                if code == KafkaError._TIMED_OUT and renew_on_timeout:
                    logger.info("%s timed out: asking again with a new admin client", what)
                    self._admin, renew_on_timeout = AdminClient(self.admin_settings()), False
                    continue
                if code not in settling or time.monotonic() > deadline:
                    raise self._failure(what, exc, action=action, acl=acl) from exc
                if code in _METADATA_STALE:
                    # Learn the partitions' leaders anew; best effort (the request is retried,
                    # and fails with its own error in the end).
                    try:
                        self._metadata()
                    except BackendUnavailableError as refresh:
                        logger.debug("metadata refresh: %s", refresh)
            time.sleep(_METADATA_RETRY_S)

    def _failure(
        self,
        what: str,
        exc: KafkaException,
        *,
        action: str,
        acl: tuple[str, str],
        alternative: str = "",
    ) -> Exception:
        """The error to raise for a failed admin request: the ACL to grant when the brokers
        refused it, else Kafka being unavailable."""
        operation, resource = acl
        refused = not_allowed(
            kafka_error(exc),
            action=action,
            operation=operation,
            resource=resource,
            config=self._producer_config,
            alternative=alternative,
        )
        return refused if refused is not None else unavailable(what, exc, self._bootstrap)
