"""A real uvicorn server on 127.0.0.1 serving the API app, in a thread of the test process."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from scheduler.api.app import create_app
from scheduler.api.auth import Role, TokenFile
from scheduler.settings import Settings
from tests.http import free_port


class ApiServer:
    """`create_app(settings)` served by uvicorn on a free port until `stop`."""

    def __init__(self, settings: Settings, tokens_file: Path, **config: Any) -> None:
        self.settings = settings
        self.tokens = TokenFile(tokens_file)
        self.port = free_port()
        self.scheme = "https" if config.get("ssl_certfile") else "http"
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        self.app = create_app(settings, tokens=self.tokens)
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app, host="127.0.0.1", port=self.port, log_level="warning", **config
            )
        )
        self._thread = threading.Thread(target=self._server.run, name="api-server", daemon=True)

    def start(self, timeout: float = 30.0) -> ApiServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the API server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)

    def token(self, role: Role) -> str:
        """A new token of `role` (named after it, with a counter to keep names unique)."""
        taken = {entry.name for entry in self.tokens.entries()}
        name = next(f"{role}-{n}" for n in range(1000) if f"{role}-{n}" not in taken)
        return self.tokens.create(role, name)
