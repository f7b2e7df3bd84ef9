"""A worker's health probes: what /healthz and /readyz answer from starting to stopped, and for a
poll loop that is stuck."""

from __future__ import annotations

import threading
import time
import urllib.request
from typing import Any

import pytest

from scheduler import Task
from scheduler.errors import ConfigurationError
from scheduler.health import serve
from scheduler.stores.abc import TaskStore
from scheduler.testing import TEST_SETTINGS, TestEngine
from scheduler.worker import Worker
from tests.engine.helpers import Recorder, soon
from tests.http import probe


def answer(port: int, path: str) -> tuple[int, dict[str, Any]]:
    answered = probe(port, path)
    assert answered is not None, f"nothing answers on port {port}"
    return answered


class BlockingChecks:
    """A store whose `check_replaced`, which the poll loop asks on each turn, waits once `hang`
    is set until `release` is, as a hung file system would. (A hung write no longer holds the
    loop: it waits for a write a bounded time, then goes on with the partition paused.)"""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self.hang = threading.Event()
        self.release = threading.Event()
        self.waiting = threading.Event()

    def check_replaced(self) -> None:
        if self.hang.is_set():
            self.waiting.set()
            self.release.wait(30)
        self._store.check_replaced()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_the_probes_follow_a_worker_from_starting_to_stopped(data_dir):
    engine = TestEngine(Recorder(), data_dir=data_dir, partitions=4)
    server = serve(0, lambda: engine.worker.health(stall_s=60), host="127.0.0.1")
    port = server.server_port
    try:
        status, body = answer(port, "/readyz")
        assert (status, body["state"], body["ready"]) == (503, "starting", False)
        assert answer(port, "/healthz")[0] == 200  # not stuck: just not started

        with engine:
            status, body = answer(port, "/readyz")
            assert status == 200, body
            assert body["state"] == "running" and body["partitions"] == [0, 1, 2, 3]
            assert body["persist_failing"] == {} and body["problem"] is None
            assert answer(port, "/healthz")[0] == 200
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
                assert b"scheduler_partitions_owned" in page.read()

        status, body = answer(port, "/healthz")
        assert (status, body["state"], body["live"]) == (503, "stopped", False)
        assert answer(port, "/readyz")[0] == 503
    finally:
        server.shutdown()
        server.server_close()


def test_a_stuck_poll_loop_fails_the_liveness_probe_until_it_turns_again(data_dir):
    stores: list[BlockingChecks] = []

    def wrap(store: TaskStore) -> TaskStore:
        stores.append(BlockingChecks(store))
        return stores[0]  # type: ignore[return-value]

    engine = TestEngine(Recorder(), data_dir=data_dir, partitions=4, wrap_store=wrap)
    with engine:
        assert engine.worker.health(stall_s=0.5).live
        stores[0].hang.set()
        engine.client.schedule_task(Task("stuck", soon(), "k")).result(timeout=10)
        assert stores[0].waiting.wait(10)
        time.sleep(1.0)  # the poll thread waits in the store, beyond the 0.5 s allowed
        health = engine.worker.health(stall_s=0.5)
        assert (health.state, health.live, health.ready) == ("stalled", False, False)
        assert health.problem is not None and "has not turned for" in health.problem
        assert "health_stall_s = 0.5" in health.problem
        assert engine.worker.health(stall_s=60).state == "running"  # the threshold decides

        stores[0].release.set()
        engine.join()
        assert engine.worker.health(stall_s=0.5).state == "running"


def test_a_worker_without_partitions_is_ready(data_dir):
    """More workers than partitions: the spare has joined its group and is ready, so a rolling
    restart that waits on /readyz does not wait on it forever."""
    first = TestEngine(Recorder(), data_dir=data_dir, partitions=1)
    with first:
        spare = Worker(
            log=first.log,
            store=first.worker.store,
            executor=Recorder(),
            settings=TEST_SETTINGS,
            group_id=first.worker.group_id,
        )
        spare.start()
        try:
            deadline = time.monotonic() + 10
            while spare.health().state != "running" and time.monotonic() < deadline:
                time.sleep(0.05)
            health = spare.health()
            assert (health.state, health.partitions) == ("running", []), health
            assert first.worker.health().partitions == [0]
        finally:
            spare.stop()


def test_a_port_in_use_is_refused_naming_the_setting():
    first = serve(0, lambda: pytest.fail("not probed"), host="127.0.0.1")
    try:
        with pytest.raises(ConfigurationError, match="SCHEDULER_METRICS_PORT"):
            serve(first.server_port, lambda: pytest.fail("not probed"), host="127.0.0.1")
    finally:
        first.shutdown()
        first.server_close()
