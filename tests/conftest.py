"""Shared fixtures. Server fixtures (Kafka, Cassandra) come from tests/servers.py."""

from __future__ import annotations

import logging

import pytest

from tests import servers

logging.getLogger("pykka").setLevel(logging.CRITICAL)


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tell tests/servers.py which test is asking for a server (it checks the test's markers)."""
    servers.running_test = item
