"""`LogConsumer` on confluent-kafka with Kafka's cooperative (incremental) rebalance protocol.

confluent-kafka calls our rebalance callbacks from inside `consume`/`poll`/`close`. They assign
and unassign themselves, so that the order matches Java's listener:

* assigned: the listener runs first, while seeks it makes are collected; then the partitions are
  assigned with those start offsets (a seek on a partition whose fetcher has not started yet fails
  in librdkafka with `_STATE`);
* revoked / lost: the listener runs first, while the partitions are still assigned, so it can
  commit their offsets; then they are unassigned, even if the listener raised (its exception
  propagates out of `poll`).

After each callback the partitions the consumer keeps are fetched again at once (`_wake_fetchers`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from scheduler.errors import ConfigurationError, SchedulerError
from scheduler.logs.abc import LogConsumer, LogRecord, RebalanceListener
from scheduler.logs.kafka_brokers import RENEW_AFTER_S, watch_client
from scheduler.logs.kafka_config import (
    config_refused,
    kafka_error,
    logger,
    reason,
    unavailable,
    uses_consumer_protocol,
)
from scheduler.logs.kafka_security import (
    REFUSAL_HOLDS_S,
    REFUSAL_LOG_EVERY_S,
    not_allowed,
)
from scheduler.logs.kafka_topic_id import committed_elsewhere, tagged, untagged

_COMMIT_RETRY_S = 0.1
COORDINATOR_MOVING = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
)
"""What a group's coordinator answers while it moves or, after a restart, loads the group's
offsets."""
_TRANSIENT = COORDINATOR_MOVING | frozenset(
    {
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        # KIP-848: the member's epoch moved on while the commit was on its way. librdkafka
        # heartbeats at once to learn the new one, but does not retry a manual commit itself.
        KafkaError.STALE_MEMBER_EPOCH,
    }
)
"""Commit errors worth retrying; others (ILLEGAL_GENERATION, FENCED_MEMBER_EPOCH: we were
dropped) are final."""
_NOT_SUPPORTED = ("API version not supported", "Required feature not supported")
"""librdkafka's words for a request the broker does not know (UNSUPPORTED_VERSION,
_UNSUPPORTED_FEATURE)."""
_WAKE_TIMEOUT_S = 0.5
"""How long `_wake_fetchers` waits for the leaders' answers (past a second, librdkafka's broker
threads wake by themselves)."""


class KafkaLogConsumer(LogConsumer):
    """One member of a consumer group reading one topic; used by one polling thread."""

    def __init__(
        self,
        *,
        config: dict[str, Any],
        topic: str,
        request_timeout_s: float,
        topic_id: Callable[[], str | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._topic = topic
        self._read_topic_id = topic_id
        self._topic_id: str | None = None
        """The topic's ID as of the latest assignment, named by every commit (see
        `kafka_topic_id`); None if it could not be read."""
        self._bootstrap = str(config.get("bootstrap.servers", ""))
        self._config = config
        self._timeout = request_timeout_s
        strategy = str(config.get("partition.assignment.strategy", ""))
        # KIP-848's `consumer` protocol is incremental only, like the cooperative assignors.
        self._cooperative = "cooperative" in strategy or uses_consumer_protocol(config)
        self._refusals, self._brokers = watch_client(
            self._bootstrap,
            config,
            client=f"consumer of topic {topic!r}",
            meanwhile=(
                "The consumer keeps trying and loses nothing: records wait in the topic, and "
                "the tasks already stored run on."
            ),
            clock=clock,
        )
        self._consumer = self._new_client()
        self._closing: list[Consumer] = []
        """Clients replaced by `_renew_if_stranded` whose close has not returned yet."""
        self._listener: RebalanceListener | None = None
        self._assigned: set[int] = set()
        self._arriving: set[int] = set()
        """Partitions being assigned while the listener's `on_assigned` runs."""
        self._arrival_commits: dict[int, tuple[int | None, str]] = {}
        """The arriving partitions' committed offsets, read once at the start of `_on_assign`
        and served to the listener (nothing commits them before it returns)."""
        self._start_offsets: dict[int, int] = {}
        """Seeks of arriving partitions made inside `on_assigned`, applied as start offsets."""
        self._closed = False
        self._joined = False
        """True once the group has assigned this consumer partitions (or none) the first time."""
        self._refusals_logged: dict[int, float] = {}
        """When an ACL refusal of each kind was last logged, to log it once a minute."""
        self._not_allowed_last: tuple[float, SchedulerError] | None = None
        """The latest ACL refusal of a running consumer and when it came, for `problem`."""

    # -- group membership --------------------------------------------------------------------

    def subscribe(self, listener: RebalanceListener) -> None:
        if self._listener is not None:
            raise RuntimeError(f"the consumer of topic {self._topic!r} is already subscribed")
        self._listener = listener
        self._subscribe_client()

    def _new_client(self) -> Consumer:
        try:
            return Consumer({**self._config, "error_cb": self._refusals, "stats_cb": self._brokers})
        except KafkaException as exc:
            raise config_refused("consumer", exc, "consumer_config") from None

    def _subscribe_client(self) -> None:
        self._consumer.subscribe(
            [self._topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def _renew_if_stranded(self) -> None:
        """Replace the librdkafka client once it has known no broker for `RENEW_AFTER_S` (and,
        while it owns partitions, for a whole session timeout, after which the group has
        dropped it anyway): it would never connect again (see `kafka_brokers`). Its partitions
        are lost to the listener; the new client joins the group again."""
        stranded_s = self._brokers.known_none_for()
        if self._listener is None or self._closed or stranded_s < RENEW_AFTER_S:
            return
        owned = sorted(self._assigned)
        if owned and stranded_s < self.session_timing()[0]:
            return
        lost = f" (partitions {owned} are given up as lost)" if owned else ""
        self._brokers.say_renewing(stranded_s, f"consumer, which rejoins the group{lost}")
        old = self._consumer
        try:
            if owned:
                self._listener.on_lost(owned)
        finally:
            self._assigned.difference_update(owned)
            self._brokers.renewed()
            self._consumer = self._new_client()
            self._subscribe_client()
            # Closed aside: with no broker to leave the group through, its close may wait.
            self._closing.append(old)
            threading.Thread(
                target=self._close_retired, args=(old,), name="kafka-consumer-close", daemon=True
            ).start()

    def _retired(self, client: Consumer) -> bool:
        """Whether `client` is one this consumer replaced (its callbacks come from its close)."""
        return any(client is old for old in self._closing)

    def _close_retired(self, client: Consumer) -> None:
        try:
            client.close()
        except Exception as error:  # replaced because it was stranded: its close says nothing new
            logger.debug("closing a replaced consumer: %s", error)
        finally:
            self._closing.remove(client)

    def assignment(self) -> set[int]:
        return set(self._assigned)

    def has_joined(self) -> bool:
        return self._joined

    def problem(self) -> str | None:
        refused = self._refusals.recent()
        if refused is not None:
            return str(refused)
        latest = self._not_allowed_last
        if latest is not None and time.monotonic() - latest[0] <= REFUSAL_HOLDS_S:
            return str(latest[1])
        return self._brokers.problem()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # librdkafka leaves the group here and runs `on_revoke` for everything still owned.
        self._consumer.close()

    # -- reading -----------------------------------------------------------------------------

    def session_timing(self) -> tuple[float, float]:
        """From the configuration; under KIP-848's `consumer` protocol the broker times the
        session (its default minimum is 45 s), and the classic defaults are a lower bound."""
        session = float(self._config.get("session.timeout.ms", 10_000)) / 1000
        heartbeat = float(self._config.get("heartbeat.interval.ms", 1_000)) / 1000
        return session, heartbeat

    def poll(self, max_records: int, timeout: float) -> list[LogRecord]:
        # `consume(n, t)` waits the whole `t` unless n records arrive: take what is buffered,
        # and only if nothing is, wait for the first record and take what arrived with it.
        self._renew_if_stranded()
        deadline = time.monotonic() + timeout
        while True:
            messages = self._consumer.consume(max_records, 0)
            if not messages:
                first = self._consumer.poll(max(0.0, deadline - time.monotonic()))
                if first is None:
                    return []
                messages = [first]
                if max_records > 1:
                    messages.extend(self._consumer.consume(max_records - 1, 0))
            records = [r for r in map(self._record, messages) if r is not None]
            # A partition revoked by a callback inside this very call may have left records in
            # the batch; its new owner reads them from the committed offset.
            records = [r for r in records if r.partition in self._assigned]
            if records or time.monotonic() >= deadline:
                return records

    def seek(self, partition: int, offset: int) -> None:
        if partition not in self._assigned:
            raise NotAssignedError(
                f"partition {partition} of topic {self._topic!r} is not assigned to this "
                f"consumer (it owns {sorted(self._assigned)}); only owned partitions can be "
                "sought"
            )
        if partition in self._arriving:
            self._start_offsets[partition] = offset
            return
        target = TopicPartition(self._topic, partition, offset)
        try:
            self._consumer.seek(target)
        except KafkaException as exc:
            error = kafka_error(exc)
            if error is None or error.code() != KafkaError._STATE or not self._cooperative:
                raise unavailable(f"seeking partition {partition}", exc, self._bootstrap) from exc
            # Assigned, but its fetcher has not started: re-assign it with a start offset.
            self._consumer.incremental_unassign([TopicPartition(self._topic, partition)])
            self._consumer.incremental_assign([target])

    def pause(self, partitions: Collection[int]) -> None:
        if partitions:
            self._consumer.pause(self._partitions(partitions))

    def resume(self, partitions: Collection[int]) -> None:
        if partitions:
            self._consumer.resume(self._partitions(partitions))

    # -- offsets -----------------------------------------------------------------------------

    def commit(
        self,
        offsets: Mapping[int, int],
        *,
        wait: bool = True,
        metadata: Mapping[int, str] | None = None,
    ) -> None:
        if not offsets:
            return
        notes = {p: tagged(self._topic_id, (metadata or {}).get(p, "")) for p in offsets}
        wanted = [
            TopicPartition(self._topic, p, o, metadata=notes[p])
            if notes[p]
            else TopicPartition(self._topic, p, o)
            for p, o in offsets.items()
        ]
        if not wait:
            # A synchronous commit can block for good while the broker restarts
            # (confluent-kafka-python #1801); the routine commit must never stall the poll loop.
            try:
                self._consumer.commit(offsets=wanted, asynchronous=True)
            except KafkaException as exc:
                logger.warning("could not start committing offsets %s: %s", dict(offsets), exc)
            return
        deadline = time.monotonic() + self._timeout
        while True:
            error = self._try_commit(wanted)
            if error is None:
                return
            # A coordinator move or a rebalance in progress passes within moments; librdkafka
            # rejoins in its own thread, so waiting here does not block the rebalance.
            if error.code() not in _TRANSIENT or time.monotonic() >= deadline:
                raise unavailable(f"committing offsets {dict(offsets)}", error, self._bootstrap)
            time.sleep(_COMMIT_RETRY_S)

    def _try_commit(self, wanted: list[TopicPartition]) -> KafkaError | None:
        try:
            results = self._consumer.commit(offsets=wanted, asynchronous=False) or []
        except KafkaException as exc:
            error = kafka_error(exc)
            if error is None:
                raise
            return error
        return next((tp.error for tp in results if tp.error is not None), None)

    def committed_with_metadata(
        self, partitions: Collection[int]
    ) -> dict[int, tuple[int | None, str]]:
        committed = self._committed_tagged(partitions)
        return {
            p: (None, "")  # committed on a deleted topic of the same name: none on this one
            if committed_elsewhere(note, self._topic_id)
            else (offset, untagged(note)[1])
            for p, (offset, note) in committed.items()
        }

    def _committed_tagged(self, partitions: Collection[int]) -> dict[int, tuple[int | None, str]]:
        if not partitions:
            return {}
        if self._arrival_commits.keys() >= set(partitions):
            return {p: self._arrival_commits[p] for p in partitions}
        try:
            results = self._consumer.committed(self._partitions(partitions), timeout=self._timeout)
        except KafkaException as exc:
            raise unavailable("reading committed offsets", exc, self._bootstrap) from exc
        return {
            tp.partition: (tp.offset if tp.offset >= 0 else None, tp.metadata or "")
            for tp in results
        }

    def _committed_on_deleted_topic(self, partitions: list[int]) -> set[int]:
        """Which of the arriving `partitions` have offsets committed on an earlier topic of the
        same name (see `kafka_topic_id`): they are read from their first record. Best effort:
        if the brokers cannot say now, librdkafka starts at the committed offsets."""
        try:
            self._topic_id = self._read_topic_id()
            committed = self._arrival_commits = self._committed_tagged(partitions)
        except SchedulerError as error:
            logger.warning(
                "cannot check whether the committed offsets of partitions %s belong to topic "
                "%r as it is now: %s",
                partitions,
                self._topic,
                error,
            )
            return set()
        stale = {
            p: (offset, old)
            for p, (offset, note) in committed.items()
            if (old := committed_elsewhere(note, self._topic_id)) is not None
        }
        if stale:
            logger.warning(
                "the group's committed offsets of partitions %s were committed on an earlier "
                "topic named %r (ID %s; it is %s now), deleted and created again since: they "
                "would skip the new topic's first records, so these partitions are read from "
                "their first record instead (offsets were %s). Tasks already stored are stored "
                "again, which changes nothing",
                sorted(stale),
                self._topic,
                next(iter(stale.values()))[1],
                self._topic_id,
                {p: offset for p, (offset, _) in sorted(stale.items())},
            )
        return set(stale)

    # -- rebalance callbacks (run inside consume/poll/close) ---------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._retired(consumer):
            return  # a replaced client, closing: confluent-kafka assigns for it
        self._joined = True
        numbers = sorted(tp.partition for tp in partitions)
        self._assigned.update(numbers)
        self._arriving = set(numbers)
        from_first: set[int] = set()
        try:
            from_first = self._committed_on_deleted_topic(numbers) if numbers else set()
            if numbers and self._listener is not None:
                self._listener.on_assigned(numbers)
        finally:
            starts, self._start_offsets, self._arriving = self._start_offsets, {}, set()
            self._arrival_commits = {}
            for partition in from_first:
                starts.setdefault(partition, OFFSET_BEGINNING)
            if self._cooperative:
                consumer.incremental_assign(self._partitions(numbers, starts))
                self._wake_fetchers(consumer)
            else:
                # The eager protocol assigns the whole set anew: each partition starts where the
                # listener sought it, else at its committed offset.
                consumer.assign(self._partitions(sorted(self._assigned), starts))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._leave(consumer, partitions, lost=False)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._leave(consumer, partitions, lost=True)

    def _leave(self, consumer: Consumer, partitions: list[TopicPartition], *, lost: bool) -> None:
        if self._retired(consumer):
            return  # a replaced client, closing: its partitions were given up already
        numbers = sorted(tp.partition for tp in partitions)
        try:
            if numbers and self._listener is not None:
                if lost:
                    self._listener.on_lost(numbers)
                else:
                    self._listener.on_revoked(numbers)
        finally:
            self._assigned.difference_update(numbers)
            if self._cooperative:
                consumer.incremental_unassign(partitions)
                self._wake_fetchers(consumer)
            else:
                consumer.unassign()

    def _wake_fetchers(self, consumer: Consumer) -> None:
        """Have librdkafka fetch the partitions it resumed after a rebalance callback now.

        librdkafka pauses every assigned partition while a callback is pending and resumes them
        after it, but the resume does not wake the broker threads, which sleep up to a second:
        partitions that never moved would stop that long in every rebalance (docs/kafka.md).
        Asking each leader for an offset wakes its broker thread. Best effort: a leader that
        does not answer costs `_WAKE_TIMEOUT_S`."""
        if not self._assigned:
            return
        ends = [TopicPartition(self._topic, p, OFFSET_END) for p in sorted(self._assigned)]
        try:
            consumer.offsets_for_times(ends, timeout=_WAKE_TIMEOUT_S)
        except KafkaException as exc:
            logger.debug("waking the fetchers after a rebalance: %s", reason(exc))

    # -- helpers -----------------------------------------------------------------------------

    def _stopped(self, error: KafkaError) -> SchedulerError:
        """The error that stops a worker whose consumer librdkafka stopped for good."""
        text = error.str()
        refused_protocol = "ConsumerGroupHeartbeat" in text and any(
            words in text for words in _NOT_SUPPORTED
        )
        if uses_consumer_protocol(self._config) and refused_protocol:
            return ConfigurationError(
                f"the Kafka brokers at {self._bootstrap!r} refused the group protocol that "
                f"group.protocol=consumer asks for (KIP-848): {text}. It needs Kafka 4.0 or "
                "later with the group.version feature at 1 or more; remove group.protocol from "
                "SCHEDULER_KAFKA_CONSUMER_CONFIG or SCHEDULER_KAFKA_CONFIG to use the classic one"
            )
        return unavailable(f"consuming topic {self._topic!r}", error, self._bootstrap)

    def _record(self, message: Message) -> LogRecord | None:
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                return None
            refused = self._not_allowed(error)
            if refused is not None:
                if not self._joined:  # refused from the start: waiting will not grant the ACL
                    raise refused
                # Revoked while running: what is stored still runs, and the consumer catches up
                # once it is granted again.
                self._log_refusal(error.code(), refused)
                return None
            # librdkafka reports its own fatal errors as `_FATAL` events not flagged fatal.
            if error.fatal() or error.code() == KafkaError._FATAL:
                raise self._stopped(error)
            # librdkafka recovers from the rest by itself (broker restarts, leader moves).
            logger.warning("consumer of topic %r: %s", self._topic, error.str())
            return None
        kind, timestamp = message.timestamp()
        return LogRecord(
            partition=int(message.partition() or 0),
            offset=int(message.offset() or 0),
            key=message.key(),
            value=message.value(),
            timestamp_ms=timestamp if kind != TIMESTAMP_NOT_AVAILABLE else -1,
        )

    def _log_refusal(self, code: int, refused: SchedulerError) -> None:
        now = time.monotonic()
        self._not_allowed_last = (now, refused)
        if now - self._refusals_logged.get(code, -REFUSAL_LOG_EVERY_S) >= REFUSAL_LOG_EVERY_S:
            self._refusals_logged[code] = now
            logger.error("consumer of topic %r: %s", self._topic, refused)

    def _not_allowed(self, error: KafkaError) -> SchedulerError | None:
        if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            group = self._config.get("group.id")
            action, resource = f"join consumer group {group!r}", f"--group {group}"
        else:
            action, resource = f"read topic {self._topic!r}", f"--topic {self._topic}"
        return not_allowed(
            error, action=action, operation="Read", resource=resource, config=self._config
        )

    def _partitions(
        self, partitions: Collection[int], starts: Mapping[int, int] | None = None
    ) -> list[TopicPartition]:
        """`partitions` of the topic, each at its offset in `starts` if there is one, else at
        OFFSET_INVALID: where the group committed, to `assign`."""
        at = starts or {}
        return [TopicPartition(self._topic, p, at.get(p, OFFSET_INVALID)) for p in partitions]


class NotAssignedError(SchedulerError, ValueError):
    """`seek` named a partition this consumer does not own (a bug in the caller)."""
