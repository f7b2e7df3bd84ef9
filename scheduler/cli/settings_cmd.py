"""`scheduler settings show|docs`: the effective configuration, and its reference page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from scheduler.cli.context import CliState, pass_state
from scheduler.cli.output import echo_json, echo_table


@click.group()
def settings() -> None:
    """Inspect the configuration: what is in effect, and what can be set."""


@settings.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object of the values.")
@pass_state
def show(state: CliState, as_json: bool) -> None:
    """The effective settings and where each came from (default, file, env, cli).

    Values that look like secrets (Kafka passwords, tokens) are masked.
    """
    from scheduler.config import sources
    from scheduler.settings import env_name

    effective = state.settings()
    origin = sources(state.config, state.overrides)
    values = {name: _masked(name, value) for name, value in effective.model_dump().items()}
    if as_json:
        echo_json(values)
        return
    echo_table(
        ["SETTING", "VALUE", "SOURCE", "ENVIRONMENT"],
        [[name, _text(value), origin[name], env_name(name)] for name, value in values.items()],
        max_width=80,
    )


@settings.command()
def docs() -> None:
    """Print the settings reference (Markdown), as committed in docs/configuration.md."""
    from scheduler.cli.docs import render_markdown

    click.echo(render_markdown(), nl=False)


SECRET_WORDS = ("password", "secret", "token", "credential")
"""Settings, and keys of the mapping settings (`kafka_*config`, `spark_conf`), whose values are
masked."""

_SECRET_KEYS = frozenset(("sasl.oauthbearer.config",))
"""Keys whose value is free text that usually holds a secret (librdkafka's OAUTHBEARER one)."""

_NOT_SECRET_SUFFIXES = (".location", ".type", ".algorithm")
"""A `key` part names a key, but these say where it is or what kind: shown."""


def _masked(name: str, value: Any) -> Any:
    if value is not None and any(word in name for word in SECRET_WORDS):
        return "***"
    if isinstance(value, dict):
        return {key: "***" if _is_secret(str(key)) else item for key, item in value.items()}
    return value


def _is_secret(key: str) -> bool:
    """Whether a librdkafka or Spark property holds a secret: a password, token or secret, or
    key material (`ssl.key.pem`, `fs.s3a.secret.key`, `fs.azure.account.key.<account>`)."""
    lowered = key.lower()
    if lowered in _SECRET_KEYS or any(word in lowered for word in SECRET_WORDS):
        return True
    return "key" in lowered.split(".") and not lowered.endswith(_NOT_SECRET_SUFFIXES)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    if isinstance(value, dict):
        return ",".join(f"{key}={item}" for key, item in value.items()) or "-"
    if isinstance(value, Path):
        return str(value)
    return str(value)
