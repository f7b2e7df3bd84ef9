"""Shared fixtures. Server fixtures (Kafka, Cassandra) come from tests/servers.py."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, settings

from tests import servers

logging.getLogger("pykka").setLevel(logging.CRITICAL)

# Property tests assert what holds for every example, not how fast one runs: on a loaded
# machine (CI beside the servers, or several checkouts at once) an example can take seconds, and
# Hypothesis' default 200 ms deadline and its too-slow health check then fail a correct test
# (tests/batch/test_intervals.py did). Speed is the benchmark command's business.
settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("suite")


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tell tests/servers.py which test is asking for a server (it checks the test's markers)."""
    servers.running_test = item
