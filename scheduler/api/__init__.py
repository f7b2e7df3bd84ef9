"""The REST API of a deployment (`scheduler api`): `create_app` builds it, with the dashboard."""

from scheduler.api.app import create_app

__all__ = ["create_app"]
