"""The one error type of the service launcher: every message says what failed and what to do."""

from __future__ import annotations


class ServiceError(RuntimeError):
    """A local Kafka or Cassandra server could not be fetched, started, checked or stopped."""
