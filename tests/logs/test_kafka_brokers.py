"""A running consumer says when no Kafka broker answers it, and stops saying it once one does:
from statistics made up here, and from real librdkafka statistics of a consumer whose broker
is not there (a broker stopped and started under running workers is in
tests/distributed/test_server_restarts.py)."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any

import pytest

from scheduler.logs.kafka import KafkaTaskLog
from scheduler.logs.kafka_brokers import SAY_AFTER_S, BrokerWatch
from scheduler.logs.kafka_config import CONSUMER_DEFAULTS
from scheduler.logs.kafka_consumer import RENEW_AFTER_S, KafkaLogConsumer
from scheduler.logs.kafka_producer import RENEW_AFTER_S as PRODUCER_RENEW_AFTER_S
from scheduler.logs.kafka_producer import KafkaLogProducer
from tests.http import free_port
from tests.logs.test_kafka_log import Recorder, key_for, poll_until
from tests.servers import kafka_bootstrap

BOOTSTRAP = "broker-1:9092,broker-2:9092"


def stats(**states: str) -> str:
    """librdkafka's statistics, cut to what the watch reads: each broker connection's state."""
    return json.dumps(
        {"name": "rdkafka#consumer-1", "brokers": {n: {"state": s} for n, s in states.items()}}
    )


NO_BROKER_LEFT = json.dumps(
    {
        "name": "rdkafka#consumer-1",
        "brokers": {"GroupCoordinator": {"state": "INIT", "source": "logical", "nodeid": -1}},
    }
)
"""The statistics of a client that dropped every broker it knew (librdkafka issue 5301): only
the group coordinator's logical alias is listed."""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_no_broker_up_is_a_problem_until_one_is(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="scheduler.logs.kafka")
    clock = Clock()
    watch = BrokerWatch(BOOTSTRAP, client="consumer of topic 't'", clock=clock)
    watch(stats(**{"broker-1:9092/1": "UP", "broker-2:9092/2": "INIT", "GroupCoordinator": "UP"}))
    assert watch.problem() is None and not caplog.records

    # A rolling restart: one broker down, another still up. Not a problem.
    watch(stats(**{"broker-1:9092/1": "TRY_CONNECT", "broker-2:9092/2": "UP"}))
    assert watch.problem() is None and not caplog.records

    watch(stats(**{"broker-1:9092/bootstrap": "CONNECT", "GroupCoordinator": "INIT"}))
    clock.now += 1
    watch(stats(**{"broker-1:9092/bootstrap": "INIT"}))
    # The probes and the log wait SAY_AFTER_S: a connection moving or a quick restart is no outage.
    assert watch.problem() is None and not caplog.records
    clock.now += SAY_AFTER_S
    watch(stats(**{"broker-1:9092/bootstrap": "INIT"}))
    assert watch.problem() is not None
    clock.now += 38
    watch(stats(**{"broker-1:9092/bootstrap": "INIT"}))
    problem = watch.problem()
    assert problem is not None
    assert problem.startswith(f"no Kafka broker at {BOOTSTRAP} has answered for 42 s or more")
    assert "loses nothing" in problem and "rejoins its group by itself" in problem
    assert [r.getMessage() for r in caplog.records] == [
        f"consumer of topic 't': no Kafka broker at {BOOTSTRAP} has answered for 4 s or more; "
        "the consumer keeps trying and loses nothing"
    ]

    clock.now += 3
    watch(stats(**{"broker-2:9092/2": "UP"}))
    assert watch.problem() is None
    assert caplog.records[-1].getMessage() == (
        f"consumer of topic 't': Kafka at {BOOTSTRAP} answers again, after 45 s or more with no "
        "broker up"
    )
    assert len(caplog.records) == 2


def test_a_short_outage_or_a_refused_login_is_not_logged_as_brokers_away(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler.logs.kafka")
    clock, refused = Clock(), [False]
    watch = BrokerWatch(BOOTSTRAP, client="c", excused=lambda: refused[0], clock=clock)
    watch(stats(**{"broker-1:9092/1": "DOWN"}))
    clock.now += SAY_AFTER_S / 2
    assert watch.problem() is None
    watch(stats(**{"broker-1:9092/1": "UP"}))
    assert not caplog.records

    # The brokers refuse the login: they answer, and the refusal says what to change.
    refused[0] = True
    watch(stats(**{"broker-1:9092/1": "AUTH_HANDSHAKE"}))
    clock.now += 10 * SAY_AFTER_S
    watch(stats(**{"broker-1:9092/1": "DOWN"}))
    watch(stats(**{"broker-1:9092/1": "UP"}))
    assert not caplog.records


@pytest.mark.parametrize("report", ["not json", "[]", '{"brokers": []}', '{"name": "x"}'])
def test_a_report_it_cannot_read_changes_nothing(report: str) -> None:
    clock = Clock()
    watch = BrokerWatch(BOOTSTRAP, client="c", clock=clock)
    watch(stats(**{"broker-1:9092/bootstrap": "CONNECT"}))
    clock.now += SAY_AFTER_S
    watch(report)
    assert watch.problem() is not None
    watch(stats(**{"broker-1:9092/1": "UP"}))
    watch(report)
    assert watch.problem() is None


def test_a_real_consumer_with_no_broker_there_says_so_within_seconds() -> None:
    address = f"127.0.0.1:{free_port()}"  # a port nothing listens on
    config = {
        **CONSUMER_DEFAULTS,
        "bootstrap.servers": address,
        "group.id": "nobody-answers",
        "client.id": "test",
    }
    consumer = KafkaLogConsumer(config=config, topic="absent", request_timeout_s=1)
    try:
        consumer.subscribe(Recorder())
        deadline = time.monotonic() + 10
        while consumer.problem() is None and time.monotonic() < deadline:
            consumer.poll(100, 0.2)
        problem = consumer.problem()
        assert problem is not None, "no statistics report said the broker was away"
        assert problem.startswith(f"no Kafka broker at {address} has answered for"), problem
    finally:
        consumer.close()


def test_a_client_that_dropped_every_broker_it_knew_is_told_apart_from_brokers_down() -> None:
    clock = Clock()
    watch = BrokerWatch(BOOTSTRAP, client="c", clock=clock)
    watch(stats(**{"broker-1:9092/bootstrap": "TRY_CONNECT"}))  # down, but still known
    clock.now += 30
    assert watch.known_none_for() == 0.0 and watch.problem() is not None

    watch(NO_BROKER_LEFT)
    clock.now += 4
    watch(NO_BROKER_LEFT)
    assert watch.known_none_for() == 4.0
    watch(json.dumps({"brokers": {"b:9092/1": {"state": "INIT", "source": "learned"}}}))
    assert watch.known_none_for() == 0.0

    watch(NO_BROKER_LEFT)
    clock.now += 2
    watch.renewed()  # a new client's reports start afresh
    assert watch.known_none_for() == 0.0


@pytest.mark.kafka
def test_a_consumer_whose_client_knows_no_broker_any_more_loses_its_partitions_and_rejoins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """librdkafka issue 5301: a metadata answer that lists no broker, as a restarting broker
    sends while it shuts down, leaves the client with no broker to connect to, for good. The
    consumer replaces its client, which joins the group again and reads on from the commits."""
    caplog.set_level(logging.WARNING, logger="scheduler.logs.kafka")
    log = KafkaTaskLog(bootstrap_servers=kafka_bootstrap(), topic=f"test-{uuid.uuid4().hex}")
    log.ensure_topic(2)
    clock = Clock()
    config = log.consumer_settings(f"g-{uuid.uuid4().hex}", client_id="stranded")
    consumer = KafkaLogConsumer(config=config, topic=log.topic, request_timeout_s=10, clock=clock)
    listener = Recorder()
    try:
        producer = log.producer()
        for i in range(4):
            producer.send(key_for(1, 2), f'{{"i":{i}}}'.encode())
        assert producer.flush(10) == 0
        producer.close()
        consumer.subscribe(listener)
        first = poll_until(consumer, lambda rs: len(rs) >= 4)
        consumer.commit({1: first[1].offset + 1})  # two of the four done
        assert consumer.assignment() == {0, 1}

        consumer._brokers(NO_BROKER_LEFT)  # what the stranded client's statistics say
        clock.now += RENEW_AFTER_S
        assert consumer.poll(100, 0.1) == []  # owning partitions: waits out the session
        assert listener.partitions("lost") == set()
        consumer._brokers(NO_BROKER_LEFT)  # again: a real report may have come in that poll
        clock.now += 10 + RENEW_AFTER_S  # past session.timeout.ms
        again = poll_until(consumer, lambda rs: len(rs) >= 2)

        kinds = [kind for kind, _, _ in listener.events]
        assert kinds[:2] == ["assigned", "lost"] and kinds[-1] == "assigned", kinds
        assert listener.partitions("lost") == {0, 1}
        assert consumer.assignment() == {0, 1}
        assert [r.offset for r in again if r.partition == 1] == [2, 3]  # from the commit on
        said = [r.getMessage() for r in caplog.records if "issue 5301" in r.getMessage()]
        assert len(said) == 1 and "partitions [0, 1] are given up as lost" in said[0], said
    finally:
        consumer.close()
        log.delete_topic()
        log.close()


@pytest.mark.kafka
def test_a_producer_whose_client_knows_no_broker_any_more_is_replaced_and_its_senders_follow(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """librdkafka issue 5301 on the producing side: a stranded client would queue records until
    they time out, for good. The producer replaces it; a sender made before, and `send`, go on
    through the new client."""
    caplog.set_level(logging.WARNING, logger="scheduler.logs.kafka")
    log = KafkaTaskLog(bootstrap_servers=kafka_bootstrap(), topic=f"test-{uuid.uuid4().hex}")
    log.ensure_topic(2)
    clock = Clock()
    reports: list[str] = []  # a caller's own statistics reader goes on getting them
    config = {**log.producer_settings(), "stats_cb": reports.append}
    producer = KafkaLogProducer(config=config, topic=log.topic, clock=clock)
    try:
        made_before = producer.sender()
        assert made_before(key_for(0, 2), b'{"i":0}').result(10) == 0
        stranded = producer._producer
        deadline = time.monotonic() + 10
        while producer._producer is stranded and time.monotonic() < deadline:
            producer._brokers(NO_BROKER_LEFT)  # what the stranded client's statistics say
            clock.now += PRODUCER_RENEW_AFTER_S  # the background thread looks every few ms
            time.sleep(0.05)
        assert producer._producer is not stranded, "the stranded client was not replaced"

        assert made_before(key_for(1, 2), b'{"i":1}').result(10) == 1
        assert producer.send(key_for(0, 2), b'{"i":2}').result(10) == 0
        assert producer.send_many([(key_for(1, 2), b'{"i":3}')]).result(10) == 1
        said = [r.getMessage() for r in caplog.records if "issue 5301" in r.getMessage()]
        assert len(said) == 1 and "starting a new producer" in said[0], said
        count = len(reports)
        deadline = time.monotonic() + 10
        while len(reports) == count and time.monotonic() < deadline:
            producer.flush(0.2)  # statistics are served by whoever polls
        assert len(reports) > count, "the new client's statistics did not reach the caller's"
    finally:
        producer.close()
        log.delete_topic()
        log.close()


def stranded_producer(log: KafkaTaskLog, clock: Clock, **config: Any) -> KafkaLogProducer:
    """A producer whose client reaches no broker (its bootstrap is a closed port), so every
    record it takes stays queued; no statistics of its own, so only the test feeds its watch."""
    config = {
        **log.producer_settings(),
        "bootstrap.servers": f"127.0.0.1:{free_port()}",
        "statistics.interval.ms": 0,
        **config,
    }
    return KafkaLogProducer(config=config, topic=log.topic, clock=clock)


def renew(producer: KafkaLogProducer, log: KafkaTaskLog, clock: Clock) -> None:
    """Let the producer's next client reach the real broker, and have its statistics say that
    the present one knows no broker: the background thread replaces it within milliseconds."""
    stranded = producer._producer
    producer._config = log.producer_settings()
    producer._brokers(NO_BROKER_LEFT)
    clock.now += PRODUCER_RENEW_AFTER_S
    deadline = time.monotonic() + 10
    while producer._producer is stranded:
        assert time.monotonic() < deadline, "the stranded client was not replaced"
        time.sleep(0.005)


def read_back(log: KafkaTaskLog, count: int) -> dict[bytes, list[int]]:
    """Each key's record numbers (`{"i": n}`), in the order the topic holds them."""
    consumer = log.consumer(f"g-{uuid.uuid4().hex}", client_id="reader")
    try:
        consumer.subscribe(Recorder())
        records = poll_until(consumer, lambda rs: len(rs) >= count)
    finally:
        consumer.close()
    by_key: dict[bytes, list[int]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None and record.value is not None
        by_key.setdefault(record.key, []).append(json.loads(record.value)["i"])
    return by_key


@pytest.mark.kafka
def test_a_producer_renewal_hands_the_queued_records_to_the_new_client_in_order() -> None:
    """Records queued on a client that is replaced are not failed: they go to the new client
    in their order, ahead of what is sent after the renewal, and every future resolves
    accepted, whether it came from `send`, a sender or `send_many`."""
    log = KafkaTaskLog(bootstrap_servers=kafka_bootstrap(), topic=f"test-{uuid.uuid4().hex}")
    log.ensure_topic(2)
    clock = Clock()
    producer = stranded_producer(log, clock)
    keys = [key_for(0, 2, "a"), key_for(1, 2, "a"), key_for(0, 2, "b")]
    sent: dict[bytes, list[int]] = {key: [] for key in keys}
    futures: list[Future[int]] = []

    def send_some(first: int, last: int) -> None:
        made = producer.sender()
        for i in range(first, last, 10):
            batch = [(keys[j % 3], f'{{"i":{j}}}'.encode()) for j in range(i, i + 5)]
            futures.append(producer.send_many(batch))
            for j in range(i + 5, i + 10):
                send = producer.send if j % 2 else made
                futures.append(send(keys[j % 3], f'{{"i":{j}}}'.encode()))
            for j in range(i, i + 10):
                sent[keys[j % 3]].append(j)

    try:
        send_some(0, 300)
        assert producer.flush(0.5) > 0 and not any(f.done() for f in futures)
        renew(producer, log, clock)
        send_some(300, 400)
        for future in futures:
            assert future.exception(30) is None
        assert producer.flush(10) == 0
        assert read_back(log, 400) == sent
    finally:
        producer.close()
        log.delete_topic()
        log.close()


@pytest.mark.kafka
def test_a_record_sent_while_the_client_is_replaced_lands_behind_the_handed_over_ones() -> None:
    """A thread that keeps sending on one partition across the renewal, blocked by a full
    queue when it starts: its records, queued on the old client and handed over, or sent to
    the new one (waiting for the handover), are all accepted and land in the order they were
    sent."""
    log = KafkaTaskLog(bootstrap_servers=kafka_bootstrap(), topic=f"test-{uuid.uuid4().hex}")
    log.ensure_topic(2)
    clock = Clock()
    producer = stranded_producer(log, clock, **{"queue.buffering.max.messages": 1000})
    key = key_for(1, 2)
    futures: list[Future[int]] = []
    stop = threading.Event()

    def keep_sending() -> None:
        send = producer.sender()
        while not stop.is_set() or len(futures) < 2000:
            futures.append(send(key, f'{{"i":{len(futures)}}}'.encode()))
            if len(futures) % 100 == 0:
                time.sleep(0.001)

    sender = threading.Thread(target=keep_sending)
    try:
        sender.start()
        while len(futures) < 1000:  # the queue is full: the next send waits for room
            time.sleep(0.01)
        time.sleep(0.1)
        assert len(futures) == 1000
        renew(producer, log, clock)
        stop.set()
        sender.join(30)
        assert not sender.is_alive()
        for future in futures:
            assert future.exception(30) is None
        assert read_back(log, len(futures)) == {key: list(range(len(futures)))}
    finally:
        stop.set()
        producer.close()
        log.delete_topic()
        log.close()
