"""`LogProducer` on confluent-kafka: idempotent, acks=all, Java-compatible partitioning.

librdkafka reports deliveries only from inside `poll`/`flush`. Sending threads serve the ready
reports themselves every few sends, since they hold the GIL anyway; when sending stops, a daemon
thread takes over, so the last futures resolve too (while senders are busy it stays away: taking
the GIL from them costs throughput). Futures resolve on whichever thread polled, so their
done-callbacks must be quick. The daemon thread also replaces a client that knows no broker any
more (`_renew_if_stranded`, see `kafka_brokers`), handing the records queued on it to the new
client in their order.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from scheduler import speedups
from scheduler.errors import (
    BackendUnavailableError,
    SchedulerError,
    TaskDataError,
    TopicMissingError,
)
from scheduler.logs._delivery import _LOCK as _OUTCOME_LOCK
from scheduler.logs._delivery import DeliveryFuture
from scheduler.logs.abc import BatchFuture, LogProducer, RecordKey, Sender
from scheduler.logs.kafka_brokers import RENEW_AFTER_S, watch_client
from scheduler.logs.kafka_config import (
    STATS_INTERVAL_MS,
    config_refused,
    kafka_error,
    logger,
    unavailable,
)
from scheduler.logs.kafka_security import not_allowed
from scheduler.metrics import ticked

_POLL_INTERVAL_S = 0.05
_IDLE_AFTER_S = 0.005
"""How long without a `send` before the background thread starts serving delivery reports."""
_BUSY_LOOK_S = 0.05
"""How often the background thread looks while senders are busy enough to serve reports."""
_POLL_EVERY = 64
"""Senders serve delivery reports every this many sends (each `poll` is a GIL round trip)."""
_SERVE_ALSO_EVERY_S = 5.0
"""How often the background thread calls `serve_also`: a log line is at most this late."""
_CLOSE_FLUSH_S = 30.0
_CONNECT_EARLY_S = 1.0
"""How long a new producer waits for each early metadata request: usually 1 to 60 ms."""
_MAX_SENDERS = 64
_TOPIC_GONE = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)
"""Errors of a record whose topic, or whose partition of it, does not exist: `produce` raises one
once librdkafka knows, else the delivery report carries one after
`topic.metadata.propagation.max.ms` (30 s by default)."""
_PARTITION_DROPPED = KafkaError._DESTROY
"""How a delivery report fails a record that was already queued for a partition when the
partition left librdkafka's metadata (its topic was deleted): librdkafka destroys the partition's
queue with it. Never the handle's own termination, which `close` precedes with a purge."""
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
_FAILED_BY_FATAL = _PURGED | {KafkaError._FATAL}
"""How librdkafka fails the records of a producer a fatal error stopped."""
_ANY_PARTITION = -1
"""librdkafka's RD_KAFKA_PARTITION_UA: the configured partitioner chooses."""
_RETIRED_DRAIN_S = 30.0
"""How long a replaced client is polled for the reports of records that raced the renewal."""
_HANDOVER_S = 10.0
"""How long a renewal moves the old client's records (milliseconds, usually), and how long a
send made meanwhile waits for it before it produces anyway."""


class _Gate:
    """What a C sender reads `_open` from (it takes the fast path while that is true): one per
    sender, closed when the producer closes or replaces the client the sender was built on, so
    that the sender falls back to its Python send, which follows the new client."""

    __slots__ = ("__weakref__", "_open")

    def __init__(self, is_open: bool) -> None:
        self._open = is_open


class KafkaLogProducer(LogProducer):
    """Sends records to one topic; safe to share between threads."""

    def __init__(
        self,
        *,
        config: dict[str, Any],
        topic: str,
        serve_also: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._topic = topic
        self._serve_also = serve_also
        """Called every `_SERVE_ALSO_EVERY_S` by the background thread (the log's `serve`)."""
        self._bootstrap = str(config.get("bootstrap.servers", ""))
        self._config = config
        self._fatal: KafkaError | None = None
        """The fatal error librdkafka stopped the producer with, once it has (see `_poll`)."""
        self._refusals, self._brokers = watch_client(
            self._bootstrap,
            config,
            client=f"producer of topic {topic!r}",
            meanwhile=(
                "The producer keeps trying: records wait, and fail once they have waited "
                "message.timeout.ms."
            ),
            clock=clock,
        )
        self._gates: weakref.WeakSet[_Gate] = weakref.WeakSet()
        """The gates of the C senders built on the current client (weak: `send` may build a
        sender per call, past `_MAX_SENDERS`)."""
        self._rebinds: weakref.WeakKeyDictionary[Sender, Callable[[Callable[..., Any]], None]]
        self._rebinds = weakref.WeakKeyDictionary()
        """Each live Python send's way to follow a new client's `produce`."""
        self._renewing = threading.RLock()
        """Held while the client is replaced (reentrant: a callback served meanwhile may send)."""
        self._producer = self._new_client()
        self._produce: Callable[..., Any] = self._producer.produce
        """What sends call: the client's `produce`, or `_produce_after_handover` meanwhile."""
        self._handover: list[tuple[Message, Callable[..., Any]]] | None = None
        """While a renewal moves records: the old client's purged records and their callbacks."""
        self._handed_over = threading.Event()
        self._handed_over.set()
        self._connect_early()
        self._closed = threading.Event()
        self._open = True
        """False once closing starts: a plain flag, read on every send."""
        self._sends = itertools.count(1)
        """Paces the senders' polls; its repr tells the background thread that somebody sent."""
        self._senders: dict[Callable[[], object] | None, Sender] = {}
        """`sender`s by their `on_durable`, for `send` (making one builds a class); at most
        `_MAX_SENDERS`."""
        self._close_lock = threading.Lock()
        self._serving = threading.Lock()
        """Held by a thread serving delivery reports while it waits on a future."""
        self._poller = threading.Thread(
            target=self._poll_until_closed, name=f"kafka-producer-{topic}", daemon=True
        )
        self._poller.start()

    def _new_client(self) -> Producer:
        # Statistics (unless configured off) for `BrokerWatch`: they say when the client knows
        # no broker any more. Served by whoever polls, as the delivery reports are.
        config = {"statistics.interval.ms": STATS_INTERVAL_MS, **self._config}
        theirs = config.get("stats_cb")  # a caller's own reader gets every report too
        watch = self._brokers

        def stats_cb(stats: str) -> None:
            watch(stats)
            if theirs is not None:
                theirs(stats)

        try:
            return Producer({**config, "error_cb": self._refusals, "stats_cb": stats_cb})
        except KafkaException as exc:
            raise config_refused("producer", exc, "producer_config") from None

    def _renew_if_stranded(self) -> bool:
        """Replace the librdkafka client once it has known no broker for `RENEW_AFTER_S` (see
        `kafka_brokers`), and hand the records queued on it to the new one. True if it did.

        The senders stop first: C senders fall back to their Python send, whose `produce`
        waits for the handover (up to `_HANDOVER_S`). The old client is then purged and polled:
        its records come back as purged (`_hand_over` keeps them with their callbacks), and
        go to the new client, idempotent with acks=all too, in the order they were queued on
        each partition, before any record sent after them; their futures resolve from the new
        client's reports. librdkafka reports a purge per queue, the partition's queue before its
        transmit and in-flight ones (`rd_kafka_purge`), so the records are put back in order
        by their creation time (a stable sort: ties keep the report order). A stranded client
        holds them all in the partition queues, in order, since its brokers left. A record
        the broker had written but not acknowledged may be written twice: records are keyed
        by their task, so a duplicate is harmless. What cannot be handed over fails as before:
        a record the new client refuses, or one a sender that read the old client's `produce`
        before the renewal queues on it after the handover (`_purge`d for `_RETIRED_DRAIN_S`)."""
        with self._renewing:
            stranded_s = self._brokers.known_none_for()
            if stranded_s < RENEW_AFTER_S or not self._open:
                return False
            self._brokers.say_renewing(
                stranded_s, "producer (records queued on the old one move to it)"
            )
            new = self._new_client()
            self._handed_over.clear()
            self._follow(self._produce_after_handover)
            old, self._producer = self._producer, new
            self._brokers.renewed()
            self._handover = []
            try:
                self._hand_over_from(old)
            finally:
                self._handover = None
                self._follow(self._producer.produce)
                self._handed_over.set()
        # What senders racing the renewal gave the old client after the handover fails there.
        threading.Thread(
            target=_purge,
            args=(old, _RETIRED_DRAIN_S, "draining"),
            name="kafka-producer-retire",
            daemon=True,
        ).start()
        return True

    def _follow(self, produce: Callable[..., Any]) -> None:
        """Make every send call `produce`: C senders fall back to their Python send, and
        `send` builds them again on the client in use."""
        self._produce = produce
        for gate in self._gates:
            gate._open = False
        self._gates.clear()
        self._senders.clear()
        for rebind in list(self._rebinds.values()):
            rebind(produce)

    def _produce_after_handover(self, *record: Any) -> None:
        """`produce` while a renewal hands records over: after them."""
        self._handed_over.wait(_HANDOVER_S)
        self._producer.produce(*record)

    def _hand_over(self, error: KafkaError, message: Message, on_delivery: Any) -> bool:
        """Keep a record purged from a replaced client for the new one; False if it fails."""
        handover = self._handover
        if handover is None or error.code() not in _PURGED or self._fatal is not None:
            return False
        if not self._open:  # closing: what is left fails, as at any close
            return False
        handover.append((message, on_delivery))
        return True

    def _hand_over_from(self, old: Producer) -> None:
        """Purge `old`, and queue what it held on the current client, in order."""
        _purge(old, _HANDOVER_S, "purging")  # the reports land in `_handover`
        records = self._handover or []
        records.sort(key=lambda record: record[0].timestamp()[1])
        for message, on_delivery in records:
            partition = message.partition()  # None while the topic was unknown: choose
            partition = _ANY_PARTITION if partition is None else partition
            record = (message.value(), message.key(), partition, on_delivery)
            try:
                self._produce_when_room(*record, produce=self._producer.produce)
            except KafkaException as exc:
                on_delivery(kafka_error(exc) or KafkaError(KafkaError._FAIL, str(exc)), message)

    def _connect_early(self) -> None:
        """Ask for metadata now, so that the first records do not wait half a second.

        An idempotent producer sends nothing before it has a producer id, which librdkafka asks
        for at start (before any broker is connected) and then on a 500 ms timer, or on a
        metadata response. The first response can come before its broker is connected, so ask
        twice. Best effort: a broker that does not answer costs a second here."""
        try:
            for _ in range(2):
                self._producer.list_topics(timeout=_CONNECT_EARLY_S)
        except KafkaException as exc:
            logger.debug("producer metadata at start: %s", exc)

    def send(
        self, key: RecordKey, value: bytes, *, on_durable: Callable[[], object] | None = None
    ) -> Future[int]:
        send = self._senders.get(on_durable)
        if send is None:
            send = self.sender(on_durable)
            if len(self._senders) < _MAX_SENDERS:
                self._senders[on_durable] = send
        return send(key, value)

    def sender(self, on_durable: Callable[[], object] | None = None) -> Sender:
        """A `send` for records that all share `on_durable`: `schedule_task`'s path. What a
        record's future needs but its state lives on a class made here once, and the future is
        the record's delivery callback, so a send allocates one object. Where the C path is
        built (`scheduler.speedups`) the send is C, handing the rare cases to the Python one."""
        with self._renewing:  # not half on a client being replaced
            return self._sender(on_durable)

    def _sender(self, on_durable: Callable[[], object] | None) -> Sender:
        fast = speedups.enabled()
        future_type: type[_RecordDelivery] = type(
            "_RecordDelivery",
            (_FastRecordDelivery if fast else _RecordDelivery,),
            # staticmethod: a plain function on a class would be bound to the future.
            {
                "__slots__": (),
                "_sender": self,
                "_on_success": None if on_durable is None else staticmethod(on_durable),
            },
        )
        produce, poll, topic = self._produce, self._poll, self._topic
        produce_when_room, sends = self._produce_when_room, self._sends

        def rebind(new_produce: Callable[..., Any]) -> None:
            nonlocal produce
            produce = new_produce

        def send(key: RecordKey, value: bytes) -> Future[int]:
            if not self._open:
                raise BackendUnavailableError(f"the producer for topic {topic!r} is closed")
            future = future_type()
            try:
                # Positional (topic, value, key, partition, on_delivery): keyword arguments cost
                # a dict per call. Partition -1 is librdkafka's "unassigned": the partitioner picks.
                produce(topic, value, key, _ANY_PARTITION, future)
            except BufferError:
                produce_when_room(value, key, _ANY_PARTITION, future)
            except KafkaException as exc:  # refused before sending: too large, mostly
                raise self.refused(exc, len(value)) from None
            # Serve ready delivery reports now and then, while this thread holds the GIL anyway.
            if not next(sends) % _POLL_EVERY:
                poll(0)
            return future

        self._rebinds[send] = rebind
        native = speedups.native
        if not fast or native is None:
            return send
        gate = _Gate(self._open)
        self._gates.add(gate)
        sender: Sender = native.RecordSender(
            producer=gate,
            future_type=future_type,
            produce=produce,
            topic=topic,
            sends=sends,
            poll=poll,
            slow_send=send,
            poll_every=_POLL_EVERY,
        )
        return sender

    def send_many(self, records: Sequence[tuple[RecordKey, bytes]]) -> Future[int]:
        """One delivery callback shared by the batch: no future per record (`send`'s body is
        inlined in the loop; each report is one Python call)."""
        if not self._open:
            raise BackendUnavailableError(f"the producer for topic {self._topic!r} is closed")
        batch = BatchFuture(len(records), _BatchDelivery(self))
        on_delivery = batch.reporter(self.failure, self._hand_over)
        produce, poll, topic, sends = (self._produce, self._poll, self._topic, self._sends)
        for key, value in records:
            try:
                produce(topic, value, key, _ANY_PARTITION, on_delivery)
            except BufferError:
                self._produce_when_room(value, key, _ANY_PARTITION, on_delivery)
            except KafkaException as exc:
                raise self.refused(exc, len(value)) from None
            if not next(sends) % _POLL_EVERY:
                poll(0)
                produce = self._produce  # a renewal's, a long batch follows it soon
        return batch.future

    def _produce_when_room(self, *record: Any, produce: Callable[..., Any] | None = None) -> None:
        """Produce (value, key, partition, on_delivery), serving deliveries while the local
        queue is full: never drop. Through `_produce` unless told: it waits out a handover."""
        while True:
            try:
                (produce or self._produce)(self._topic, *record)
                return
            except BufferError:
                self._poll(_POLL_INTERVAL_S)

    def flush(self, timeout: float) -> int:
        try:
            return int(self._producer.flush(timeout))
        except KafkaException as exc:
            self._note_fatal(exc)
            return int(self._producer.flush(0))  # the records it failed are reported now

    def _poll(self, timeout: float) -> None:
        try:
            self._producer.poll(timeout)
        except KafkaException as exc:
            self._note_fatal(exc)

    def _note_fatal(self, exc: KafkaException) -> None:
        """Keep the fatal error that `poll` or `flush` raised (librdkafka raises it once, then
        fails every record with a purge): the records' failures then say what stopped it."""
        error = kafka_error(exc)
        if error is None or not error.fatal():
            raise exc
        if self._fatal is None:
            self._fatal = error
            logger.error("the producer for topic %r stopped: %s", self._topic, self.failure(error))

    def close(self) -> None:
        with self._close_lock:
            if self._closed.is_set():
                return
            self._open = False
            with self._renewing:
                for gate in self._gates:
                    gate._open = False
            remaining = self.flush(_CLOSE_FLUSH_S)
            if remaining:
                # Fail the futures of what could not be delivered instead of leaving them
                # pending forever: purged records get delivery reports with _PURGE_QUEUE.
                logger.error(
                    "closing the producer for topic %r with %d records not acknowledged; "
                    "their futures fail",
                    self._topic,
                    remaining,
                )
                self._producer.purge()
                self._producer.flush(0)
            self._closed.set()
        self._poller.join()

    def failure(self, error: KafkaError, message: Message | None = None) -> SchedulerError:
        """Why a record was not acknowledged, from its delivery report."""
        if self._fatal is not None and error.code() in _FAILED_BY_FATAL:
            error = self._fatal
        if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            size = None if message is None else len(message.value() or b"")
            return self._too_large(error, size)
        partition = None if message is None else message.partition()
        if error.code() in _TOPIC_GONE:
            return self._topic_gone(error.str(), partition)
        if error.code() == _PARTITION_DROPPED:
            return self._topic_gone("the partition left the producer's metadata", partition)
        action = f"write to topic {self._topic!r}"
        if error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            action += " (an idempotent producer gets its producer id only with Write on a topic)"
        refused = not_allowed(
            error,
            action=action,
            operation="Write",
            resource=f"--topic {self._topic}",
            config=self._config,
        )
        if refused is not None:
            return refused
        failed = unavailable(
            f"making a record durable on topic {self._topic!r}", error, self._bootstrap
        )
        login_refused = self._refusals.recent()  # why the record never got through, then
        if login_refused is not None:
            return BackendUnavailableError(f"{failed}. {login_refused}")
        return failed

    def refused(self, exc: KafkaException, size: int) -> Exception:
        """Why `produce` refused a record outright (librdkafka's own checks)."""
        error = kafka_error(exc)
        if error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            return self._too_large(error, size)
        if error is not None and error.code() in _TOPIC_GONE:
            return self._topic_gone(error.str(), None)
        if error is not None and error.code() == KafkaError._FATAL and self._fatal is None:
            self._poll(0)  # librdkafka raises the error that stopped the producer from here
        if self._fatal is not None:
            return self.failure(self._fatal)
        return exc

    def _topic_gone(self, why: str, partition: int | None) -> TopicMissingError:
        # The producer was built on an existing topic (`KafkaTaskLog.producer` checks), so the
        # topic, or the partition, went away under it.
        which = "its partition" if partition is None or partition < 0 else f"partition {partition}"
        return TopicMissingError(
            f"the record was not written: topic {self._topic!r} on {self._bootstrap!r} does "
            f"not exist, or lacks {which} ({why}); was it "
            "deleted, or created again with fewer partitions? Create it with the deployment's "
            "partition count (`scheduler topic create`) and send the task again"
        )

    def _too_large(self, error: KafkaError, size: int | None) -> TaskDataError:
        # A deployment that raised max_data_bytes past Kafka's limits: the task is refused
        # for its size, not because Kafka is down, and the error says which limits to move.
        record = "the record" if size is None else f"the record of {size:,} bytes"
        return TaskDataError(
            f"{record} is larger than Kafka accepts on topic {self._topic!r} ({error.str()}); "
            "keep task data smaller (setting max_data_bytes refuses it before sending), or "
            "raise the producer's message.max.bytes (SCHEDULER_KAFKA_CONFIG) and the topic's "
            "max.message.bytes together"
        )

    def serve_until_done(self, future: Future[int], timeout: float | None) -> None:
        """Serve delivery reports on the calling thread until `future` is done or `timeout`
        passes: a thread that waits for an acknowledgement may as well fetch it. One thread
        serves at a time; others wait as usual."""
        if not self._serving.acquire(blocking=False):
            return
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not future.done():
                wait = _POLL_INTERVAL_S
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        return
                self._poll(wait)
        finally:
            self._serving.release()

    def _poll_until_closed(self) -> None:
        sends_seen = -1
        serve_also_at = time.monotonic() + _SERVE_ALSO_EVERY_S
        while not self._closed.is_set():
            self._renew_if_stranded()
            if self._serve_also is not None and time.monotonic() >= serve_also_at:
                serve_also_at = time.monotonic() + _SERVE_ALSO_EVERY_S
                try:
                    self._serve_also()
                except Exception:  # this thread must live on: it serves the delivery reports
                    logger.exception("serving the log's other clients failed")
            sends = ticked(self._sends)
            if sends == sends_seen:  # nobody sent for a while: serve the reports here
                self._poll(_POLL_INTERVAL_S)
                continue
            # Senders busy enough serve the reports themselves: look less often, since every
            # look takes the GIL from them.
            busy = sends - sends_seen >= _POLL_EVERY
            sends_seen = sends
            time.sleep(_BUSY_LOOK_S if busy else _IDLE_AFTER_S)


def _purge(old: Producer, seconds: float, doing: str) -> None:
    """Purge a replaced client and serve its reports until it holds nothing (or `seconds`)."""
    deadline = time.monotonic() + seconds
    try:
        while len(old) and time.monotonic() < deadline:
            old.purge()
            old.poll(0.1)
    except Exception as error:  # replaced because it was stranded: its errors say nothing new
        logger.debug("%s a replaced producer: %s", doing, error)


class _ServedWhileAwaited(Future[int]):
    """A future whose waiting thread serves delivery reports (`serve_until_done`)."""

    __slots__ = ()
    _sender: KafkaLogProducer

    def result(self, timeout: float | None = None) -> int:
        return super().result(self._serve(timeout))

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return super().exception(self._serve(timeout))

    def _serve(self, timeout: float | None) -> float | None:
        """Serve delivery reports until done or `timeout`; what is left of `timeout`."""
        if self.done():
            return timeout
        started = time.monotonic()
        self._sender.serve_until_done(self, timeout)
        return None if timeout is None else max(0.0, timeout - (time.monotonic() - started))


class _BatchDelivery(_ServedWhileAwaited):
    """A bulk call's future (`send_many`)."""

    def __init__(self, sender: KafkaLogProducer) -> None:
        super().__init__()
        self._sender = sender


class _RecordDelivery(_ServedWhileAwaited, DeliveryFuture):
    """One record's future, and the record's delivery report callback (`__call__`)."""

    __slots__ = ()
    _sender: KafkaLogProducer
    """Set on each `sender`'s subclass, and so is `_on_success`: a class attribute there, which
    shadows DeliveryFuture's slot of that name, so inherited methods find it without a field
    per record."""

    def __init__(self) -> None:
        # DeliveryFuture.__init__ less `_on_success`, which is on the class.
        self._made = False
        self._outcome = None

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._fail(error, message)
            return
        # DeliveryFuture.set_result, inlined: one call per record, not three.
        partition = message.partition() or 0
        on_success = self._on_success
        if on_success is not None:
            on_success()  # before any waiter wakes, so a caller sees it counted
        with _OUTCOME_LOCK:
            made = self._made
            twice = not made and self._outcome is not None
            if not made and not twice:
                self._outcome = partition
        if made:
            Future.set_result(self, partition)
        elif twice:
            self._already_finished()

    def result(self, timeout: float | None = None) -> int:
        outcome = self._outcome  # the common case, answered here: one call, not three
        if type(outcome) is int:
            return outcome
        return super().result(timeout)

    def _fail(self, error: KafkaError, message: Message) -> None:
        if not self._sender._hand_over(error, message, self):
            self.set_exception(self._sender.failure(error, message))


class _FastRecordDelivery(_RecordDelivery):
    """`_RecordDelivery` whose delivery report and `result` are C (`scheduler._speedups`), over
    the same fields and the same lock, with Future's public `set_result`. Used only where the C
    path is built."""

    __slots__ = ()


if speedups.native is not None:
    speedups.native.install_delivery(_FastRecordDelivery, Future.set_result)
