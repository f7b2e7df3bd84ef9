"""`scheduler schema apply`: create the store's tables (and Cassandra keyspace) ahead of time.

Workers create the schema on start unless `create_schema` is off; operators who manage schema
changes separately (or whose workers lack the CREATE permission) run this once instead.
"""

from __future__ import annotations

import click

from scheduler.cli.context import CliState, pass_state


@click.group()
def schema() -> None:
    """Manage the task store's schema."""


@schema.command()
@pass_state
def apply(state: CliState) -> None:
    """Create the keyspace and tables if missing (idempotent; existing data is kept).

    Cassandra: the keyspace with the configured replication, then the tables. SQLite: the
    store file in the data dir with its tables.
    """
    from scheduler.programs.runtime import open_run_store
    from scheduler.runtime import (
        EMBEDDED_STORE_FILE,
        build_store,
        cassandra_contact,
        data_dir,
    )

    settings = state.settings()
    store = build_store(settings)
    try:
        if settings.store == "cassandra":
            # The keyspace's own replication: an existing keyspace keeps it (and a warning
            # says so when it differs from the configured one).
            replication = store.apply_schema()  # type: ignore[attr-defined]
            hosts, port = cassandra_contact(settings)
            where = (
                f"keyspace {settings.cassandra_keyspace!r} on {','.join(hosts)}:{port} "
                f"(replication {replication})"
            )
        else:
            store.open(create_schema=True)
            where = f"SQLite store {data_dir(settings) / EMBEDDED_STORE_FILE}"
        open_run_store(settings, store, create_schema=True).close()  # the runs' tables
        from scheduler.schedules.runtime import open_schedule_store

        open_schedule_store(settings, store, create_schema=True).close()  # the schedules'
    finally:
        store.close()
    click.echo(f"schema applied: {where}")
