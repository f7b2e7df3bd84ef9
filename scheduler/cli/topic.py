"""`scheduler topic create|move`: create the task topic ahead of producers, and take the group's
unread records to a new topic after partitions were added to it (see `scheduler.logs.kafka_move`
and docs/kafka.md)."""

from __future__ import annotations

import click

from scheduler.cli.context import CliState, echo_err, pass_state
from scheduler.cli.output import echo_table
from scheduler.wording import counted


@click.group()
def topic() -> None:
    """The task topic (Kafka)."""


@topic.command()
@pass_state
def create(state: CliState) -> None:
    """Create the task topic with SCHEDULER_PARTITIONS partitions, if missing (idempotent).

    Producers never create it (a broker would use its own default partition count, and workers
    refuse a topic whose count differs), so run this before the first producer when no worker
    has started yet. An existing topic with another count is refused with what to do.
    """
    from scheduler.runtime import build_log, topic_partition_check

    settings = state.settings()
    log = build_log(settings)
    try:
        partitions = topic_partition_check(log, settings.partitions)
    finally:
        log.close()
    where = f" on {settings.kafka_bootstrap}" if settings.log == "kafka" else ""
    click.echo(f"topic {settings.topic!r}{where} has {counted(partitions, 'partition')}")


@topic.command()
@click.option("--to", "target", required=True, help="The new topic (created if missing).")
@pass_state
def move(state: CliState, target: str) -> None:
    """Copy the records the group has not read yet to a new topic with the stored partition
    count, and mark them read on the old one.

    For a topic that partitions were added to: workers refuse it, since many ordering ids now
    land on other partitions than their stored tasks. Stop every worker first; afterwards give
    producers and workers the new topic (SCHEDULER_TOPIC). Running it again moves only records
    that arrived since (from producers still on the old topic).
    """
    from scheduler.errors import ConfigurationError
    from scheduler.logs.kafka import KafkaTaskLog
    from scheduler.logs.kafka_move import move_unread
    from scheduler.runtime import build_log, open_store, store_partition_check
    from scheduler.settings import env_name

    settings = state.settings()
    if settings.log != "kafka":
        raise ConfigurationError(
            f"`scheduler topic move` is for a Kafka task log ({env_name('log')}=kafka); the "
            "embedded log's partition count never changes"
        )
    store = open_store(settings)
    try:
        partitions = store_partition_check(store, settings.partitions, pin=False)
    finally:
        store.close()
    source = build_log(settings)
    destination = build_log(settings.model_copy(update={"topic": target}))
    try:
        assert isinstance(source, KafkaTaskLog) and isinstance(destination, KafkaTaskLog)
        report = move_unread(source, destination, settings.group_id, partitions)
    finally:
        source.close()
        destination.close()
    rows: list[list[object]] = [
        [partition, first, end, report.moved[partition]]
        for partition, (first, end) in sorted(report.ranges.items())
    ]
    if rows:
        echo_table(["PARTITION", "FROM", "TO", "MOVED"], rows)
    click.echo(
        f"moved {report.total} unread records of group {settings.group_id!r} from topic "
        f"{report.source!r} to topic {report.target!r} ({report.partitions} partitions)."
    )
    for partition, count in sorted(report.deleted.items()):
        echo_err(
            f"warning: partition {partition} of {report.source!r}: {count} unread records had "
            "been deleted by the topic's retention before this move; their tasks are lost"
        )
    click.echo(
        f"Next: give producers and workers {env_name('topic')}={report.target}. Records "
        f"producers still send to {report.source!r} are not read: run this again after the last "
        "producer has switched, to move them too."
    )
