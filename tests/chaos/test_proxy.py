"""The fault tests' TCP proxy: it forwards, delays, cuts and heals."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from scheduler.chaos.proxy import TcpProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = TcpProxy(("127.0.0.1", port), server.server_address).start()
    try:
        yield running
    finally:
        running.close()
        server.shutdown()
        server.server_close()


def echo(proxy: TcpProxy, payload: bytes = b"ping") -> bytes:
    with socket.create_connection(proxy.listen, timeout=5) as conn:
        conn.sendall(payload)
        return conn.recv(4096)


def test_the_proxy_forwards_both_ways(proxy: TcpProxy) -> None:
    assert echo(proxy, b"hello") == b"hello"


def test_latency_delays_each_direction(proxy: TcpProxy) -> None:
    proxy.latency_ms = 150
    began = time.monotonic()
    assert echo(proxy) == b"ping"
    assert time.monotonic() - began >= 0.3  # 150 ms there and 150 ms back


def test_a_cut_drops_open_connections_and_refuses_new_ones_until_healed(proxy: TcpProxy) -> None:
    conn = socket.create_connection(proxy.listen, timeout=5)
    conn.sendall(b"a")
    assert conn.recv(10) == b"a"
    proxy.cut()
    try:
        conn.sendall(b"b")
        assert conn.recv(10) == b""  # the proxy closed it
    except ConnectionError:
        pass
    finally:
        conn.close()
    with socket.create_connection(proxy.listen, timeout=5) as fresh:
        fresh.sendall(b"c")
        try:
            assert fresh.recv(10) == b""
        except ConnectionError:
            pass
    proxy.heal()
    assert echo(proxy, b"back") == b"back"
