"""`scheduler api`: serve the REST API and the dashboard; manage their tokens; print their docs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from scheduler.cli.context import CliState, pass_state

if TYPE_CHECKING:
    from scheduler.settings import Settings


@click.group(invoke_without_command=True)
@click.option("--host", help="Listen on this address (setting api_host, default 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), help="Listen on this port (api_port).")
@click.option(
    "--cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Serve HTTPS with this PEM certificate chain (api_tls_cert); needs --key.",
)
@click.option(
    "--key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The certificate's PEM private key (api_tls_key).",
)
@click.pass_context
def api(
    ctx: click.Context, host: str | None, port: int | None, cert: Path | None, key: Path | None
) -> None:
    """Serve the REST API (/api/v1, its OpenAPI document at /openapi.json) and the dashboard
    (/dashboard) of this deployment, until Ctrl-C.

    \b
    Tokens first: scheduler api tokens create --role admin --name me
    """
    if ctx.invoked_subcommand is not None:
        return
    state = ctx.find_object(CliState) or CliState(config=None)
    overrides = {"api_host": host, "api_port": port, "api_tls_cert": cert, "api_tls_key": key}
    settings = state.settings(**{k: v for k, v in overrides.items() if v is not None})
    import uvicorn

    from scheduler.api.app import create_app
    from scheduler.api.serve import tls_problem, url, uvicorn_options

    problem = tls_problem(settings)
    if problem is not None:
        raise click.UsageError(problem)
    app = create_app(settings)
    warn_without_tokens(settings)
    click.echo(f"serving on {url(settings)}", err=True)
    uvicorn.run(app, **uvicorn_options(settings))


def warn_without_tokens(settings: Settings) -> None:
    """Say on stderr that every request will be refused when the tokens file holds none."""
    from scheduler.api.app import tokens_path

    if not _has_tokens(tokens_path(settings)):
        click.secho(
            f"warning: no API tokens in {tokens_path(settings)}: every request will be refused; "
            "make one with `scheduler api tokens create --role admin --name <you>`",
            err=True,
            fg="yellow",
        )


def _has_tokens(path: Path) -> bool:
    from scheduler.api.auth import TokenFile

    return bool(TokenFile(path).entries())


@api.group()
def tokens() -> None:
    """The API's bearer tokens (kept hashed in the tokens file, setting api_tokens_file)."""


@tokens.command("create")
@click.option(
    "--role",
    required=True,
    type=click.Choice(["read", "operate", "admin"]),
    help="read: see; operate: also schedule, cancel, retry, rerun; admin: also drop.",
)
@click.option("--name", required=True, help="Who or what holds it (unique).")
@pass_state
def create(state: CliState, role: str, name: str) -> None:
    """Make a token and print it: the only time it is shown (the file keeps its hash)."""
    from scheduler.api.app import tokens_path
    from scheduler.api.auth import Role, TokenFile

    path = tokens_path(state.settings())
    token = TokenFile(path).create(Role(role), name)
    click.echo(token)
    click.secho(
        f"token {name!r} ({role}) added to {path}; it is shown once, keep it now",
        err=True,
        fg="yellow",
    )


@tokens.command("list")
@pass_state
def list_tokens(state: CliState) -> None:
    """The tokens' names, roles and creation times (never the tokens)."""
    from scheduler.api.app import tokens_path
    from scheduler.api.auth import TokenFile
    from scheduler.cli.output import echo_table

    entries = TokenFile(tokens_path(state.settings())).entries()
    echo_table(["NAME", "ROLE", "CREATED"], [[e.name, e.role.value, e.created] for e in entries])


@tokens.command("revoke")
@click.argument("name")
@pass_state
def revoke(state: CliState, name: str) -> None:
    """Remove the token NAME: requests with it are refused at once."""
    from scheduler.api.app import tokens_path
    from scheduler.api.auth import TokenFile
    from scheduler.errors import ConfigurationError

    path = tokens_path(state.settings())
    if not TokenFile(path).revoke(name):
        raise ConfigurationError(
            f"no token named {name!r} in {path}; `scheduler api tokens list` shows them"
        )
    click.echo(f"token {name!r} revoked")


@api.command()
def docs() -> None:
    """Print the API reference (Markdown) made from the OpenAPI document, as in docs/api.md."""
    from scheduler.api.docs import render_markdown

    click.echo(render_markdown(), nl=False)
