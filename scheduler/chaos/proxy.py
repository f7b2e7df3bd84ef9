"""A TCP proxy a fault test puts between a client and one server: it adds latency, or cuts every
connection and refuses new ones until healed.

Small on purpose (toxiproxy would need its Go server beside the tests): one asyncio loop on a
daemon thread serves any number of proxies.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

_CHUNK = 65536


class _Loop:
    """The one event loop every proxy of this process runs on."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="chaos-proxy", daemon=True).start()
                cls._loop = loop
            return cls._loop


class TcpProxy:
    """Listens on ``listen`` (host, port) and forwards each connection to ``target``.

    ``latency_ms`` delays every chunk in both directions (order kept); `cut` closes the open
    connections and refuses new ones until `heal`.
    """

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.listen = listen
        self.target = target
        self.latency_ms = 0
        self._cut = False
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = _Loop.get()

    def _call(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(30)

    def start(self) -> TcpProxy:
        self._call(self._start())
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, *self.listen, reuse_address=True)

    def close(self) -> None:
        """Stop listening and drop every connection."""
        self._call(self._close(stop=True))

    def cut(self) -> None:
        """Drop every open connection and refuse new ones (as a network split would)."""
        self._cut = True
        self._call(self._close(stop=False))

    def heal(self) -> None:
        """Let connections through again."""
        self._cut = False

    async def _close(self, *, stop: bool) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        if stop and self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(_CHUNK):
                if self.latency_ms:
                    await asyncio.sleep(self.latency_ms / 1000)
                if self._cut:
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()
