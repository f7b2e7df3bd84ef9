"""A worker's HTTP port, as its probes and scrapers see it."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any


def free_port() -> int:
    """A port nothing listens on now (for a worker's --metrics-port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def probe(port: int, path: str) -> tuple[int, dict[str, Any]] | None:
    """A worker's health probe on 127.0.0.1: (HTTP status, JSON body), or None while nothing
    answers on the port."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())
    except OSError:
        return None
