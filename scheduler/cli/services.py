"""`scheduler services up|down|status`: local Kafka and Cassandra for tests and development."""

from __future__ import annotations

import time

import click

from scheduler.services import launcher
from scheduler.services.errors import ServiceError


def _selected(kafka: bool, cassandra: bool, secured: bool) -> tuple[str, ...]:
    chosen = (("kafka", kafka), ("cassandra", cassandra), (launcher.SECURED_CASSANDRA, secured))
    return tuple(name for name, on in chosen if on)


def _show(st: launcher.ServerStatus) -> None:
    health = click.style("healthy", fg="green") if st.healthy else click.style("down", fg="red")
    pid = str(st.pid) if st.pid is not None else "-"
    line = f"{st.name:<17} pid {pid:<8} {st.address:<16} {health}"
    click.echo(f"{line}  {st.detail}" if st.detail else line)


@click.group()
def services() -> None:
    """Run Kafka and Cassandra locally from Maven Central jars (needs Java 17 and Maven).

    State, logs and the downloaded jars live in .services/ of the checkout, or in
    $SCHEDULER_SERVICES_DIR.
    """


@services.command()
@click.option("--kafka/--no-kafka", default=True, help="Start Kafka (default: yes).")
@click.option("--cassandra/--no-cassandra", default=True, help="Start Cassandra (default: yes).")
@click.option(
    "--secured-cassandra/--no-secured-cassandra",
    default=False,
    help="Also start a second Cassandra node that requires a password login and mutual TLS, "
    "on port 9142, for trying the security settings (default: no).",
)
def up(kafka: bool, cassandra: bool, secured_cassandra: bool) -> None:
    """Start the servers and wait until they answer; a running healthy server is left alone."""
    for name in _selected(kafka, cassandra, secured_cassandra):
        began = time.monotonic()
        try:
            st = launcher.start(name)
        except ServiceError as exc:
            raise click.ClickException(str(exc)) from exc
        _show(st)
        click.echo(f"{'':<17} ready after {time.monotonic() - began:.1f} s")
        if name == launcher.SECURED_CASSANDRA:
            _show_secured_login()


@services.command()
@click.option("--kafka/--no-kafka", default=True, help="Stop Kafka (default: yes).")
@click.option("--cassandra/--no-cassandra", default=True, help="Stop Cassandra (default: yes).")
@click.option(
    "--secured-cassandra/--no-secured-cassandra",
    default=True,
    help="Stop the secured Cassandra node if it runs (default: yes).",
)
def down(kafka: bool, cassandra: bool, secured_cassandra: bool) -> None:
    """Stop the servers this launcher started (their data is kept)."""
    for name in _selected(kafka, cassandra, secured_cassandra):
        try:
            stopped = launcher.stop(name)
        except ServiceError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"{name:<17} {'stopped' if stopped else 'was not running'}")


@services.command()
def status() -> None:
    """Print each server's pid, address and whether it answers; exit 1 if any does not."""
    statuses = [launcher.status(name) for name in launcher.SERVERS]
    secured = launcher.status(launcher.SECURED_CASSANDRA)
    if secured.pid is not None:  # listed only when started: `up` leaves it out by default
        statuses.append(secured)
    for st in statuses:
        _show(st)
    if not all(st.healthy for st in statuses):
        raise SystemExit(1)


def _show_secured_login() -> None:
    """The settings that reach the secured node, to paste into a shell."""
    from scheduler.services.cassandra import SUPERUSER, SecuredCassandra

    server = launcher.server(launcher.SECURED_CASSANDRA)
    assert isinstance(server, SecuredCassandra)
    tls = server.tls
    click.echo(f"{'':<17} connect with (superuser; create a role of your own for real use):")
    for name, value in (
        ("SCHEDULER_CASSANDRA_HOSTS", server.address),
        ("SCHEDULER_CASSANDRA_USERNAME", SUPERUSER[0]),
        ("SCHEDULER_CASSANDRA_PASSWORD", SUPERUSER[1]),
        ("SCHEDULER_CASSANDRA_TLS_CA_FILE", tls.ca),
        ("SCHEDULER_CASSANDRA_TLS_CERT_FILE", tls.client_cert),
        ("SCHEDULER_CASSANDRA_TLS_KEY_FILE", tls.client_key),
    ):
        click.echo(f"{'':<17}   export {name}={value}")
