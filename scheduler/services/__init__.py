"""Local Kafka and Cassandra servers fetched from Maven Central, for tests and development.

Only the CLI (`scheduler services ...`) and test fixtures use this package; the scheduler itself
just connects to whatever servers its settings name.
"""

from scheduler.services.errors import ServiceError
from scheduler.services.launcher import (
    SERVERS,
    ServerStatus,
    down,
    restart,
    start,
    state_dir,
    status,
    stop,
    up,
)

__all__ = [
    "SERVERS",
    "ServerStatus",
    "ServiceError",
    "down",
    "restart",
    "start",
    "state_dir",
    "status",
    "stop",
    "up",
]
