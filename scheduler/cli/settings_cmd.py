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


SECRET_WORDS = ("password", "secret", "token")
"""Settings, and keys of the `kafka_*config` mappings, whose values are masked."""


def _masked(name: str, value: Any) -> Any:
    if value is not None and any(word in name for word in SECRET_WORDS):
        return "***"
    if name.startswith("kafka_") and name.endswith("config") and isinstance(value, dict):
        return {
            key: "***" if any(word in key.lower() for word in SECRET_WORDS) else item
            for key, item in value.items()
        }
    return value


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
