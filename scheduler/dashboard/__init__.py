"""The dashboard: server-rendered pages (Jinja2) made live with htmx, served by the API's process.

No JavaScript build step: htmx is vendored in `static/htmx.min.js` (the npm package `htmx.org`,
its version in docs/dashboard.md), beside a few lines of our own (`static/dashboard.js`) that
show times in the viewer's time zone. A login with an API token opens a session held by the
server; the cookie carries only the session's random id (HttpOnly, SameSite=Strict).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"


def mount(app: FastAPI) -> None:
    """Add the dashboard's pages and its static files to `app`."""
    from scheduler.dashboard import pages, plans

    app.include_router(pages.router)
    app.include_router(plans.router)
    app.mount("/dashboard/static", StaticFiles(directory=STATIC), name="dashboard-static")
