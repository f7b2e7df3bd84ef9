"""`scheduler services up|down|status`: local Kafka and Cassandra for tests and development."""

from __future__ import annotations

import time

import click

from scheduler.services import launcher
from scheduler.services.errors import ServiceError


def _selected(kafka: bool, cassandra: bool) -> tuple[str, ...]:
    return tuple(n for n, on in (("kafka", kafka), ("cassandra", cassandra)) if on)


def _show(st: launcher.ServerStatus) -> None:
    health = click.style("healthy", fg="green") if st.healthy else click.style("down", fg="red")
    pid = str(st.pid) if st.pid is not None else "-"
    line = f"{st.name:<10} pid {pid:<8} {st.address:<16} {health}"
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
def up(kafka: bool, cassandra: bool) -> None:
    """Start the servers and wait until they answer; a running healthy server is left alone."""
    for name in _selected(kafka, cassandra):
        began = time.monotonic()
        try:
            st = launcher.start(name)
        except ServiceError as exc:
            raise click.ClickException(str(exc)) from exc
        _show(st)
        click.echo(f"{'':<10} ready after {time.monotonic() - began:.1f} s")


@services.command()
@click.option("--kafka/--no-kafka", default=True, help="Stop Kafka (default: yes).")
@click.option("--cassandra/--no-cassandra", default=True, help="Stop Cassandra (default: yes).")
def down(kafka: bool, cassandra: bool) -> None:
    """Stop the servers this launcher started (their data is kept)."""
    for name in _selected(kafka, cassandra):
        try:
            stopped = launcher.stop(name)
        except ServiceError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"{name:<10} {'stopped' if stopped else 'was not running'}")


@services.command()
def status() -> None:
    """Print each server's pid, address and whether it answers; exit 1 if any does not."""
    statuses = [launcher.status(name) for name in launcher.SERVERS]
    for st in statuses:
        _show(st)
    if not all(st.healthy for st in statuses):
        raise SystemExit(1)
