"""Why a worker on Cassandra keeps CPython's collector pace (`scheduler.engine.collector`): the
driver leaves every request in a reference cycle, which only the cyclic collector frees."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tests.servers import cassandra_contact

pytestmark = pytest.mark.cassandra


@pytest.fixture
def collector_paused() -> Iterator[None]:
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _response_futures() -> int:
    return sum(1 for tracked in gc.get_objects() if type(tracked).__name__ == "ResponseFuture")


def test_the_cassandra_driver_leaves_each_answered_request_in_a_reference_cycle(
    collector_paused,
):
    from cassandra.cluster import Cluster

    hosts, port = cassandra_contact()
    cluster = Cluster(contact_points=hosts, port=port, protocol_version=4)
    try:
        session = cluster.connect()
        before = _response_futures()
        for _ in range(20):
            session.execute_async("SELECT release_version FROM system.local").result()
        # Nothing of ours holds them, yet they stay until the cyclic collector runs.
        assert _response_futures() - before >= 20, (
            "the driver no longer leaves answered requests in cycles: a worker on Cassandra "
            "may collect at the slower pace again (scheduler.engine.collector)"
        )
        gc.collect()
        assert _response_futures() - before < 20
    finally:
        cluster.shutdown()
