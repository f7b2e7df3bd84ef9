"""The Cassandra node or the Kafka broker restarts under load: workers wait and retry, producers
back-pressure, and every task the log acknowledged still runs, in order.

These restart the servers the project's launcher started (`scheduler services up`), so other
test sessions on the machine see the outage too.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from uuid import uuid4

import pytest

from scheduler.fleet import HistoryReport, KeyTuple, LoadGenerator, read_history
from scheduler.logs.kafka import KafkaTaskLog
from tests.distributed.conftest import START_TIMEOUT_S, Fleet, now_ms, some_sleep
from tests.http import free_port, probe
from tests.servers import kafka_bootstrap

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.slow]

RATE_PER_S = 100
AFTER_RESTART_S = 6.0
"""Load kept up after the server is back, to see new work flow again."""
HEALTH_STALL_S = 10.0
"""The workers' `health_stall_s` here: below the outage (13 s on a quiet machine, over a minute on
a loaded one), so a poll loop that waited on the server would fail /healthz (docs/metrics.md: an
outage fails neither probe). One store request's timeout (10 s): the poll loop waits for its
persist, and a write sent to a node that is stopping or starting may end only then; at 5 s, a
loaded machine saw 5.0-5.3 s silences in the Cassandra restart (scripts/faults.sh, 2026-11-27,
docs/reliability.md)."""


class ProbeWatch:
    """Asks the workers' /healthz and /readyz every 0.25 s, keeping every answer that was not a
    200, the longest `last_poll_s` seen, the problems the bodies named and each worker's last
    one."""

    def __init__(self, ports: dict[str, int]) -> None:
        self.ports = ports
        self.failed: list[tuple[str, str, int | None, dict]] = []
        self.longest_silence_s = 0.0
        self.answers = 0
        self.problems: set[str] = set()
        self.last_problem: dict[str, str | None] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> ProbeWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            for name, port in self.ports.items():
                for path in ("/healthz", "/readyz"):
                    answer = probe(port, path)
                    self.answers += 1
                    if answer is None or answer[0] != 200:
                        status, body = answer if answer is not None else (None, {})
                        self.failed.append((name, path, status, body))
                    else:
                        silence = float(answer[1]["last_poll_s"])
                        self.longest_silence_s = max(self.longest_silence_s, silence)
                        self.last_problem[name] = answer[1]["problem"]
                        if answer[1]["problem"]:
                            self.problems.add(answer[1]["problem"])


def restartable(name: str) -> None:
    from scheduler.services import launcher

    if launcher.status(name).pid is None:
        why = f"{name} was not started by this checkout's launcher, so it cannot restart it"
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"{why}; in CI, scripts/test.sh starts the servers (leave unset the "
                "SCHEDULER_KAFKA_BOOTSTRAP and SCHEDULER_CASSANDRA_HOSTS variables)"
            )
        pytest.skip(why)  # a developer's own servers: this test is the one that cannot use them


def restart_under_load(
    fleet: Fleet, name: str
) -> tuple[HistoryReport, LoadGenerator, int, int, ProbeWatch]:
    """Two workers under load; restart `name`; wait for the backlog. Returns the report, the
    load, when the restart began and ended (epoch ms), and what the probes answered."""
    from scheduler.services import launcher

    restartable(name)
    ports = {"w1": free_port(), "w2": free_port()}
    workers = [
        fleet.worker(name, metrics_port=str(port), health_stall_s=str(HEALTH_STALL_S))
        for name, port in ports.items()
    ]
    for worker in workers:
        worker.wait_until_owning(START_TIMEOUT_S)
    watch = ProbeWatch(ports)
    load = LoadGenerator(
        fleet.client(),
        ordering_ids=20,
        rate_per_s=RATE_PER_S,
        duration_s=180,
        lead_ms=1000,
        data=some_sleep(),
    ).start()
    time.sleep(5)
    watch.start()
    began = now_ms()
    status = launcher.restart(name)
    # `start` waits until the server answers, then asks once more for its status: a node that
    # has just answered can miss that second check on a loaded machine (CQL connect timed out
    # while the workers reconnected, scripts/faults.sh 2026-11-27). Ask until it answers again.
    deadline = time.monotonic() + 60
    while not status.healthy and time.monotonic() < deadline:
        time.sleep(1)
        status = launcher.status(name)
    back = now_ms()
    assert status.healthy, status.detail
    for worker in workers:
        assert worker.alive, f"{worker.name} died:\n{worker.output()[-3000:]}"
    time.sleep(AFTER_RESTART_S)
    watch.stop()
    print(
        f"\n[{name} restart] probes: {watch.answers} answers, longest poll-loop silence "
        f"{watch.longest_silence_s:.2f} s"
    )
    assert watch.answers and not watch.failed, watch.failed[:5]
    for worker in workers:
        if watch.last_problem.get(worker.name):
            # Still naming the outage: what the worker logged says which connection it waits on.
            print(f"[{worker.name} still reports a problem] its log:\n{worker.output()[-3000:]}")
    load.stop()
    accepted = load.join(timeout=180)
    report = fleet.wait_until_executed(accepted, timeout=150)
    for worker in workers:
        assert worker.alive, f"{worker.name} died:\n{worker.output()[-3000:]}"
    return report, load, began, back, watch


def drained_after(fleet: Fleet, report: HistoryReport, back_ms: int) -> float:
    """Seconds from the server's return until every task due before it had run."""
    ends = [
        e.end_ms
        for e in read_history(fleet.record)
        if e.ok and e.end_ms is not None and e.scheduled_ms < back_ms
    ]
    return (max(ends) - back_ms) / 1000 if ends else 0.0


def first_runs_of_duplicates(
    fleet: Fleet, report: HistoryReport, began: int
) -> dict[KeyTuple, float]:
    """Each duplicated key's first successful run: when it ended, in seconds after the outage
    began (what a failure needs to say which part of the outage lost its status)."""
    first_end: dict[KeyTuple, int] = {}
    for e in read_history(fleet.record):
        if e.ok and e.end_ms is not None and e.key in report.duplicates:
            first_end[e.key] = min(first_end.get(e.key, e.end_ms), e.end_ms)
    return {key: (end - began) / 1000 for key, end in first_end.items()}


def check(report: HistoryReport) -> None:
    assert report.missing == [], report.missing[:10]
    assert report.order_violations == [], report.order_violations[:5]
    assert report.concurrent_violations == [], report.concurrent_violations[:5]


def test_a_cassandra_restart_under_load_loses_no_task(fleet: Fleet) -> None:
    report, load, began, back, watch = restart_under_load(fleet, "cassandra")
    print(
        f"\n[cassandra restart] {report.summary()}; down for {(back - began) / 1000:.1f} s, "
        f"backlog drained {drained_after(fleet, report, back):.1f} s after it was back"
    )
    check(report)
    assert load.failed == [], "Kafka was up: every send should have been acknowledged"
    # The probes passed throughout (checked in restart_under_load) and said why the workers
    # were waiting, then stopped saying it once the node was back.
    assert any("no Cassandra node at" in said for said in watch.problems), watch.problems
    assert set(watch.last_problem.values()) == {None}, watch.last_problem
    # No worker died, so no task runs twice: the statuses a partition could not write while the
    # node was down are kept across its restarts and written once it is back (docs/architecture.md,
    # "A store outage reruns nothing"). Before, about 45 tasks of this load ran twice.
    assert report.duplicates == {}, (
        "tasks ran twice, their first runs ending this many seconds after the outage began: "
        f"{first_runs_of_duplicates(fleet, report, began)}"
    )


def test_a_kafka_restart_under_load_loses_no_accepted_task(fleet: Fleet) -> None:
    report, load, began, back, watch = restart_under_load(fleet, "kafka")
    print(
        f"\n[kafka restart] {report.summary()}; down for {(back - began) / 1000:.1f} s, "
        f"sends failed {len(load.failed)} of {load.sent}, "
        f"backlog drained {drained_after(fleet, report, back):.1f} s after it was back"
    )
    check(report)
    # As for Cassandra: the probes passed, said that no broker answered, and stopped saying it.
    assert any("no Kafka broker at" in said for said in watch.problems), watch.problems
    assert set(watch.last_problem.values()) == {None}, watch.last_problem
    if report.accepted <= 0.9 * load.sent:
        # The known stall (docs/kafka.md, "Known issue"): seen only in full CI runs, never
        # reproduced alone. Nothing accepted was lost (checked above, strictly); what is open is
        # the producer's recovery, so say where librdkafka holds the records and mark it.
        pytest.xfail(
            f"producer stall after the broker restart (issue 3): {load.sent - report.accepted} "
            f"of {load.sent} sends unacknowledged after 180 s ({failures(load)}); librdkafka's "
            f"last statistics: {where_unacknowledged(fleet.producer_stats)}"
        )


def test_a_long_lived_log_reads_offsets_and_its_group_right_after_a_broker_restart() -> None:
    """What a worker's lag metric and its check for deleted records ask, on the log the worker
    made at start. librdkafka keeps the leader epochs and the group coordinator it knew before
    the restart (the coordinator as a broker it has dropped, librdkafka issue 5511): unasked
    anew, offset requests failed as fenced and group requests timed out, for minutes."""
    from scheduler.services import launcher

    restartable("kafka")
    log = KafkaTaskLog(
        bootstrap_servers=kafka_bootstrap(), topic=f"restart-{uuid4().hex}", request_timeout_s=5
    )
    group, partitions = f"restart-{uuid4().hex}", [0, 1, 2, 3]
    try:
        log.ensure_topic(len(partitions))
        # Asked once before, as a running worker has: librdkafka now caches the coordinator.
        assert [lag.partition for lag in log.describe_group(group)] == partitions
        assert log.first_offsets(partitions) == dict.fromkeys(partitions, 0)
        status = launcher.restart("kafka")
        assert status.healthy, status.detail
        assert log.first_offsets(partitions) == dict.fromkeys(partitions, 0)
        assert [lag.partition for lag in log.describe_group(group)] == partitions
    finally:
        log.delete_topic()
        log.close()


def failures(load: LoadGenerator) -> str:
    """How the unaccepted sends ended, by error: a future still unresolved when `join` gave up
    (TimeoutError) is a stall; an error is a send the producer refused or failed, as the records
    of a client replaced after it lost every broker are (kafka_producer `_renew_if_stranded`)."""
    kinds = Counter(f"{type(error).__name__}: {str(error)[:160]}" for _, error in load.failed)
    return "; ".join(f"{count} x {kind}" for kind, count in kinds.most_common(3)) or "none failed"


def where_unacknowledged(stats: str | None) -> str:
    """The parts of librdkafka's statistics that say where unacknowledged records sit."""
    if stats is None:
        return "none received"
    snapshot = json.loads(stats)
    brokers = {
        name: {k: broker.get(k) for k in ("state", "stateage", "outbuf_cnt", "waitresp_cnt")}
        for name, broker in snapshot.get("brokers", {}).items()
    }
    queued = {
        f"{topic}[{number}]": {
            k: partition.get(k)
            for k in ("leader", "broker", "msgq_cnt", "xmit_msgq_cnt", "msgs_inflight")
        }
        for topic, entry in snapshot.get("topics", {}).items()
        for number, partition in entry.get("partitions", {}).items()
        if partition.get("msgq_cnt")
        or partition.get("xmit_msgq_cnt")
        or partition.get("msgs_inflight")
    }
    return json.dumps(
        {
            "msg_cnt": snapshot.get("msg_cnt"),
            "eos": snapshot.get("eos"),
            "brokers": brokers,
            "partitions_holding_records": queued,
        }
    )
