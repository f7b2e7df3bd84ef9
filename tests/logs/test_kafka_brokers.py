"""A running consumer says when no Kafka broker answers it, and stops saying it once one does:
from statistics made up here, and from real librdkafka statistics of a consumer whose broker
is not there (a broker stopped and started under running workers is in
tests/distributed/test_server_restarts.py)."""

from __future__ import annotations

import json
import logging
import time

import pytest

from scheduler.logs.kafka_brokers import SAY_AFTER_S, BrokerWatch
from scheduler.logs.kafka_config import CONSUMER_DEFAULTS
from scheduler.logs.kafka_consumer import KafkaLogConsumer
from tests.http import free_port
from tests.logs.test_kafka_log import Recorder

BOOTSTRAP = "broker-1:9092,broker-2:9092"


def stats(**states: str) -> str:
    """librdkafka's statistics, cut to what the watch reads: each broker connection's state."""
    return json.dumps(
        {"name": "rdkafka#consumer-1", "brokers": {n: {"state": s} for n, s in states.items()}}
    )


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
    assert watch.problem() is not None  # the probes say it at once
    assert not caplog.records  # the log waits SAY_AFTER_S: a quick restart is not worth it
    clock.now += SAY_AFTER_S
    watch(stats(**{"broker-1:9092/bootstrap": "INIT"}))
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
    watch = BrokerWatch(BOOTSTRAP, client="c")
    watch(stats(**{"broker-1:9092/bootstrap": "CONNECT"}))
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
