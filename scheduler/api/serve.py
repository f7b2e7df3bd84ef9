"""Serving the app: in the foreground (`scheduler api`) or beside a worker, in a thread of its
process (`scheduler worker --api`, setting `worker_api`).

Both listen where the settings say (`api_host`, `api_port`, TLS with `api_tls_cert` and
`api_tls_key`) and open the deployment's backends themselves (the app's lifespan), so the API of
a worker reads and writes through the same ports as `scheduler api` does, never through the
worker's internals.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from scheduler.errors import ConfigurationError

if TYPE_CHECKING:
    import uvicorn

    from scheduler.settings import Settings

START_TIMEOUT_S = 60.0


def tls_problem(settings: Settings) -> str | None:
    """What is wrong with the TLS settings (one of certificate and key without the other)."""
    if (settings.api_tls_cert is None) != (settings.api_tls_key is None):
        return (
            "TLS needs both a certificate and its key: give --cert and --key (or the settings "
            "api_tls_cert and api_tls_key), or neither"
        )
    return None


def url(settings: Settings) -> str:
    """Where the dashboard of `settings` is served."""
    scheme = "https" if settings.api_tls_cert else "http"
    return f"{scheme}://{settings.api_host}:{settings.api_port}/dashboard"


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's options for `settings`: address, TLS, our logging, no `Server` header."""
    return {
        "host": settings.api_host,
        "port": settings.api_port,
        "ssl_certfile": settings.api_tls_cert,
        "ssl_keyfile": settings.api_tls_key,
        "log_config": None,
        "server_header": False,
    }


class ApiThread:
    """The API and dashboard of `settings`, served by uvicorn in a daemon thread of this
    process: `start` returns once it listens, `stop` ends it (requests in flight finish)."""

    def __init__(self, settings: Settings) -> None:
        import uvicorn

        from scheduler.api.app import create_app

        problem = tls_problem(settings)
        if problem is not None:
            raise ConfigurationError(problem)
        self.settings = settings
        self.url = url(settings)
        self._server: uvicorn.Server = uvicorn.Server(
            uvicorn.Config(create_app(settings), **uvicorn_options(settings))
        )
        self._thread = threading.Thread(target=self._serve, name="api-server", daemon=True)
        self._failure: BaseException | None = None

    def _serve(self) -> None:
        try:
            self._server.run()
        except BaseException as error:  # uvicorn exits (SystemExit) when it cannot listen
            self._failure = error

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ApiThread:
        """Serve; raise `ConfigurationError` if it is not listening within `timeout_s`."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                where = f"{self.settings.api_host}:{self.settings.api_port}"
                raise ConfigurationError(
                    f"the API could not be served on {where} (is the port taken, or the "
                    f"deployment unreachable? the log says why: {self._failure!r}); choose "
                    "another with --api HOST:PORT or the settings api_host and api_port"
                )
            time.sleep(0.02)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
