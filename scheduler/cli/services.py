"""`scheduler services up|down|restart|status`: local Kafka and Cassandra for development."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import click

from scheduler.cli.context import CliState, pass_state
from scheduler.services import cluster, launcher
from scheduler.services.errors import ServiceError


def _with_servers(command: Callable[[tuple[str, ...]], None]) -> Callable[..., None]:
    """Gives `command` the servers chosen: the SERVER names if any (`down cassandra`), else the
    ones its --kafka/--cassandra/--secured-* flags (declared under this decorator) choose."""

    @functools.wraps(command)
    def with_servers(
        names: tuple[str, ...],
        kafka: bool,
        cassandra: bool,
        secured_kafka: bool,
        secured_cassandra: bool,
        in_cluster: bool,
    ) -> None:
        chosen = (
            ("kafka", kafka),
            ("cassandra", cassandra),
            (launcher.SECURED_KAFKA, secured_kafka),
            (launcher.SECURED_CASSANDRA, secured_cassandra),
        )
        flagged = tuple(name for name, on in chosen if on)
        if in_cluster and not names:
            flagged = cluster.NAMES
        command(tuple(dict.fromkeys(names)) if names else flagged)

    with_cluster = click.option(
        "--cluster",
        "in_cluster",
        is_flag=True,
        help="The replicated cluster instead: three Kafka brokers (127.0.0.1:19092-19094) and "
        "Cassandra in two datacenters (127.0.0.2-4:19042), docs/reliability.md.",
    )(with_servers)
    return click.argument(
        "names", nargs=-1, type=click.Choice(launcher.ALL_SERVERS), metavar="[SERVER]..."
    )(with_cluster)


def _show(st: launcher.ServerStatus) -> None:
    health = click.style("healthy", fg="green") if st.healthy else click.style("down", fg="red")
    pid = str(st.pid) if st.pid is not None else "-"
    line = f"{st.name:<17} pid {pid:<8} {st.address:<16} {health}"
    click.echo(f"{line}  {st.detail}" if st.detail else line)


def _timed(action: Callable[[str], launcher.ServerStatus], name: str, done: str) -> None:
    """Run `action` (start, restart) on server `name`; show its status and how long it took."""
    began = time.monotonic()
    try:
        st = action(name)
    except ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    _show(st)
    click.echo(f"{'':<17} {done} after {time.monotonic() - began:.1f} s")


@click.group()
def services() -> None:
    """Run Kafka and Cassandra locally from Maven Central jars (needs Java 17 and Maven).

    State, logs and the downloaded jars live in .services/ of the checkout, or in
    $SCHEDULER_SERVICES_DIR.
    """


@services.command()
@_with_servers
@click.option("--kafka/--no-kafka", default=True, help="Start Kafka (default: yes).")
@click.option("--cassandra/--no-cassandra", default=True, help="Start Cassandra (default: yes).")
@click.option(
    "--secured-kafka/--no-secured-kafka",
    default=False,
    help="Also start a second Kafka broker that requires TLS, a SCRAM-SHA-512 login (port 9192) "
    "or a client certificate (port 9194), and ACLs, for trying the security settings "
    "(default: no).",
)
@click.option(
    "--secured-cassandra/--no-secured-cassandra",
    default=False,
    help="Also start a second Cassandra node that requires a password login and mutual TLS, "
    "on port 9142, for trying the security settings (default: no).",
)
def up(servers: tuple[str, ...]) -> None:
    """Start the servers and wait until they answer; a running healthy server is left alone.

    Name SERVERs (kafka, cassandra, kafka-secured, cassandra-secured) to start only those.
    """
    members = tuple(name for name in servers if name in cluster.NAMES)
    if members:
        began = time.monotonic()
        try:
            statuses = launcher.up_cluster(members)
        except ServiceError as exc:
            raise click.ClickException(str(exc)) from exc
        for st in statuses:
            _show(st)
        click.echo(f"{'':<17} ready after {time.monotonic() - began:.1f} s")
    for name in servers:
        if name in members:
            continue
        _timed(launcher.start, name, "ready")
        if name == launcher.SECURED_CASSANDRA:
            _show_secured_cassandra_login()
        elif name == launcher.SECURED_KAFKA:
            _show_secured_kafka_login()


@services.command()
@_with_servers
@click.option("--kafka/--no-kafka", default=True, help="Stop Kafka (default: yes).")
@click.option("--cassandra/--no-cassandra", default=True, help="Stop Cassandra (default: yes).")
@click.option(
    "--secured-kafka/--no-secured-kafka",
    default=True,
    help="Stop the secured Kafka broker if it runs (default: yes).",
)
@click.option(
    "--secured-cassandra/--no-secured-cassandra",
    default=True,
    help="Stop the secured Cassandra node if it runs (default: yes).",
)
def down(servers: tuple[str, ...]) -> None:
    """Stop the servers this launcher started (their data is kept).

    Name SERVERs (kafka, cassandra, kafka-secured, cassandra-secured) to stop only those.
    """
    for name in servers:
        try:
            stopped = launcher.stop(name)
        except ServiceError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"{name:<17} {'stopped' if stopped else 'was not running'}")


@services.command()
@click.argument(
    "names", nargs=-1, required=True, type=click.Choice(launcher.ALL_SERVERS), metavar="SERVER..."
)
def restart(names: tuple[str, ...]) -> None:
    """Stop and start SERVERs this launcher started, keeping their data: a server restart to try
    a running fleet against (docs/kafka.md, "When the brokers are away")."""
    for name in dict.fromkeys(names):
        _timed(launcher.restart, name, "back")


@services.command()
@click.option(
    "--cluster", "in_cluster", is_flag=True, help="The replicated cluster's servers instead."
)
def status(in_cluster: bool) -> None:
    """Print each server's pid, address and whether it answers; exit 1 if any does not."""
    if in_cluster:
        statuses = [launcher.status(name) for name in cluster.NAMES]
        for st in statuses:
            _show(st)
        if not all(st.healthy for st in statuses):
            raise SystemExit(1)
        return
    statuses = [launcher.status(name) for name in launcher.SERVERS]
    for name in launcher.SECURED:
        secured = launcher.status(name)
        if secured.pid is not None:  # listed only when started: `up` leaves it out by default
            statuses.append(secured)
    for st in statuses:
        _show(st)
    if not all(st.healthy for st in statuses):
        raise SystemExit(1)


@services.command(
    "kafka-tool",
    # Everything after the tool's name is the tool's, `--help` included.
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("tool")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@pass_state
def kafka_tool(state: CliState, tool: str, args: tuple[str, ...]) -> None:
    """Run one of Kafka's own command-line tools, as a Kafka distribution's bin/ has them.

    TOOL is consumer-groups, topics, get-offsets, console-consumer, delete-records, acls or
    configs (the scripts kafka-TOOL.sh). Without --bootstrap-server the tool gets the scheduler's
    Kafka (SCHEDULER_KAFKA_BOOTSTRAP); without --command-config, the security settings of
    SCHEDULER_KAFKA_CONFIG (TLS, a PLAIN or SCRAM login), translated for Kafka's Java client.
    The first run fetches the tools' jars with Maven. For example:

    \b
      scheduler services kafka-tool consumer-groups --describe --group scheduler-workers
      scheduler services kafka-tool topics --describe --topic scheduler-tasks
    """
    from scheduler.logs.kafka_config import any_broker_listens
    from scheduler.services import kafka_tools

    cache = launcher.state_dir() / "cache"
    try:
        kafka_tools.tool_class(tool)  # an unknown name is refused before anything is fetched
        settings = state.settings()
        bootstrap = settings.kafka_bootstrap
        # The admin client's settings: the tools are admin clients, and consumers at most.
        kafka_config = {**settings.kafka_config, **settings.kafka_producer_config}
        client_props, untranslated = kafka_tools.client_properties(kafka_config)
        if untranslated and not kafka_tools.names_config(args):
            click.echo(
                f"warning: {', '.join(untranslated)} in SCHEDULER_KAFKA_CONFIG have no "
                "translation for Kafka's Java tools; pass the tool a properties file of your "
                "own (--command-config, or --consumer.config for console-consumer)",
                err=True,
            )
        if not kafka_tools.names_server(args) and not any_broker_listens(bootstrap):
            raise ServiceError(
                f"nothing answers at {bootstrap!r} (SCHEDULER_KAFKA_BOOTSTRAP): start a local "
                "Kafka with `scheduler services up`, point SCHEDULER_KAFKA_BOOTSTRAP at your "
                "brokers, or pass --bootstrap-server to the tool"
            )
        if kafka_tools.needs_fetch(tool, cache):
            click.echo("fetching Kafka's tools from Maven Central (first use only)...", err=True)
        code = kafka_tools.run(
            tool, args, bootstrap=bootstrap, cache=cache, client_props=client_props
        )
    except ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    raise SystemExit(code)


def _show_secured_kafka_login() -> None:
    """The settings that reach the secured broker, to paste into a shell."""
    from scheduler.services.kafka import ADMIN, CERT_PRINCIPAL, SecuredKafka, login_config

    server = launcher.server(launcher.SECURED_KAFKA)
    assert isinstance(server, SecuredKafka)
    for what, address, login in (
        (
            "super user; create a user of your own for real use",
            server.address,
            login_config(server.tls.ca, *ADMIN),
        ),
        (
            f"client certificate, as {CERT_PRINCIPAL}: grant it ACLs first",
            server.mtls_address,
            server.certificate_config(),
        ),
    ):
        config = ",".join(f"{k}={v}" for k, v in login.items())
        click.echo(f"{'':<17} connect with ({what}):")
        click.echo(f"{'':<17}   export SCHEDULER_KAFKA_BOOTSTRAP={address}")
        click.echo(f"{'':<17}   export SCHEDULER_KAFKA_CONFIG='{config}'")


def _show_secured_cassandra_login() -> None:
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
