"""A worker's HTTP port, as its probes and scrapers see it."""

from __future__ import annotations

import json
import random
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

_handed_out: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now (for a worker's --metrics-port), never the same twice.

    It is drawn below the kernel's ephemeral range: a port from that range (what binding port
    0 gives) can be taken, before the worker binds it, by any outgoing connection of another
    worker (to Kafka or Cassandra) or by Spark's own port-0 listeners.
    """
    low = _ephemeral_low()
    while True:
        port = random.randrange(low // 2, low)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default, and below the IANA range other systems use


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
