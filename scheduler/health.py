"""What a worker's probes read: is it alive, has it joined its group, what is it waiting on.

A worker serves these on its metrics port (`scheduler worker --metrics-port`), beside
`/metrics`, for the probes of an orchestrator (Kubernetes, Docker's healthcheck, a load
balancer's check):

* `/healthz` (liveness): 503 when restarting the process is the fix, that is when its poll loop
  has not turned for `health_stall_s` (Kafka would take its partitions away for the same
  silence after `max.poll.interval.ms`) or the worker stopped on an error.
* `/readyz` (readiness): 200 once the worker has joined its group and while it runs; 503 while it
  starts and while it stops. A rolling restart waits on it before stopping the next worker.

Both answer with the same JSON body. An unreachable store or broker does not fail either probe:
the worker retries by itself, and restarting a whole fleet in a restart loop during an outage
would only add rebalances to it. The body names such partitions (`persist_failing`, `restarting`)
and says what keeps the store or the consumer from working (`problem`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from socketserver import ThreadingMixIn
from typing import Any, Literal
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from scheduler.errors import ConfigurationError

State = Literal["starting", "running", "stalled", "stopping", "stopped", "failed"]

DEFAULT_STALL_S = 300.0
"""librdkafka's default `max.poll.interval.ms`: a consumer silent for longer leaves its group."""


@dataclass(frozen=True, slots=True)
class Health:
    """A worker's answer to its probes (`Worker.health`)."""

    state: State
    """starting (not in its group yet), running, stalled (poll loop silent), stopping, stopped
    (after a graceful stop) or failed (stopped on an error)."""
    last_poll_s: float
    """Seconds since the poll loop last turned (since the worker was made, before it starts)."""
    partitions: list[int] = field(default_factory=list)
    """Partitions this worker owns."""
    persist_failing: dict[int, int] = field(default_factory=dict)
    """Per partition whose batches the store refuses, the failed attempts in a row."""
    restarting: list[int] = field(default_factory=list)
    """Partitions whose actor tree failed and waits to be restarted from the store."""
    problem: str | None = None
    """What is wrong, when something is."""

    @property
    def live(self) -> bool:
        """Whether the process should keep running (`/healthz`)."""
        return self.state not in ("stalled", "stopped", "failed")

    @property
    def ready(self) -> bool:
        """Whether the worker is in its group, doing its share (`/readyz`)."""
        return self.state == "running"

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "live": self.live, "ready": self.ready}


def stall_problem(silent_s: float, stall_s: float) -> str:
    return (
        f"the poll loop has not turned for {silent_s:.0f} s (health_stall_s = {stall_s:g}): "
        "the worker is stuck, and Kafka takes its partitions away once max.poll.interval.ms "
        "passes; restart it"
    )


# -- the HTTP side ------------------------------------------------------------------------------


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a hanging scrape never holds the worker's exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes come every few seconds: no line per request on stderr."""


PATHS = ("/metrics", "/healthz", "/readyz")
"""What the port serves; any other path is a 404 that lists these."""
DEFAULT_HOST = "0.0.0.0"
"""Every interface, so that Prometheus and an orchestrator's probes reach the port from other
hosts (docs/metrics.md, "Where the port listens"); `metrics_host` narrows it."""


def app(probe: Callable[[], Health]) -> Callable[..., list[bytes]]:
    """A WSGI app: `/metrics` (Prometheus'), `/healthz` and `/readyz` from `probe`; 404 else."""
    from prometheus_client import make_wsgi_app

    metrics = make_wsgi_app()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            served: list[bytes] = metrics(environ, start_response)
            return served
        if path not in ("/healthz", "/readyz"):
            return _not_found(path, start_response)
        health = probe()
        ok = health.live if path == "/healthz" else health.ready
        body = json.dumps(health.as_json()).encode()
        status = "200 OK" if ok else "503 Service Unavailable"
        start_response(
            status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        )
        return [body]

    return serve


def _not_found(path: str, start_response: Callable[..., Any]) -> list[bytes]:
    body = f"no page {path}; this port serves {', '.join(PATHS)}\n".encode()
    start_response(
        "404 Not Found",
        [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
    )
    return [body]


def serve(port: int, probe: Callable[[], Health], host: str = DEFAULT_HOST) -> WSGIServer:
    """Serve `/metrics`, `/healthz` and `/readyz` on `host`:`port` from a daemon thread; the
    server (`server_port` is the port bound, for port 0; `shutdown()` stops it)."""
    try:
        server = make_server(
            host, port, app(probe), server_class=_ThreadingServer, handler_class=_QuietHandler
        )
    except (OSError, UnicodeError) as error:
        raise ConfigurationError(
            f"cannot serve metrics and health on {host}:{port} ({error}); choose a free port "
            "with --metrics-port or SCHEDULER_METRICS_PORT, and an address of this host with "
            "--metrics-host or SCHEDULER_METRICS_HOST (127.0.0.1: this host only; 0.0.0.0: "
            "every interface)"
        ) from error
    thread = threading.Thread(target=server.serve_forever, name="scheduler-http", daemon=True)
    thread.start()
    return server
