"""Shared fixtures. Server fixtures (Kafka, Cassandra) come from tests/servers.py."""

from __future__ import annotations

import logging

import pytest

logging.getLogger("pykka").setLevel(logging.CRITICAL)


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"
