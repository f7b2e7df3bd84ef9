"""A port where a server other than the one the product expects listens: for the errors that
say so (a Kafka address that is Cassandra's port, a Cassandra address that is SSH's or Kafka's)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def other_server(*, greeting: bytes | None = None, reply: bytes | None = None) -> Iterator[int]:
    """The port of a server that sends `greeting` as a connection opens, `reply` to whatever a
    client sends, and nothing else (neither: a port that takes connections and never answers)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(connection)
            connection.settimeout(5)
            with contextlib.suppress(OSError):  # the client gave up on this connection first
                if greeting is not None:
                    connection.sendall(greeting)
                if reply is not None:
                    connection.recv(4096)
                    connection.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for connection in held:
            connection.close()
