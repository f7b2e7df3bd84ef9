"""`scheduler malformed`: the records on the log that workers could not decode.

Another producer wrote them: bytes that are not JSON, a message missing fields, a due time no
store can hold. A worker logs each, counts it (`scheduler_records_malformed_total`), keeps it in
the store with why it was refused, and goes on with the partition. These commands show what it
kept, so that an operator can find the producer at fault and, if the record was meant as a task,
enqueue it again in the right form. Kept records expire with the status retention; `drop`
forgets them sooner.

Only the store is read (Kafka need not be reachable). `drop` deletes from the store directly:
kept records are evidence, not tasks, so they do not travel on the log as task changes do.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any

import click

from scheduler.cli.context import CliState, echo_err, pass_state
from scheduler.cli.keys import check_partition, iso
from scheduler.cli.output import echo_json, echo_table
from scheduler.errors import SchedulerError

if TYPE_CHECKING:
    from scheduler.settings import Settings
    from scheduler.stores.abc import MalformedRecord, TaskStore

_DROP_PAGE = 1000


@click.group()
def malformed() -> None:
    """Records on the log that workers could not decode, kept in the store: list, show, drop.

    A record is named by its PARTITION and OFFSET, as `scheduler malformed list` shows them.
    """


@malformed.command("list")
@click.option("--partition", type=click.IntRange(min=0), help="Only records of this partition.")
@click.option(
    "--from-offset",
    default=0,
    type=click.IntRange(min=0),
    help="With --partition: only records at this offset or later (to page through many).",
)
@click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(min=1), help="At most this many."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@pass_state
def list_records(
    state: CliState, partition: int | None, from_offset: int, limit: int, as_json: bool
) -> None:
    """Kept malformed records in partition and offset order, with why each was refused."""
    if from_offset and partition is None:
        raise click.UsageError("--from-offset needs --partition")
    settings = state.settings()
    check_partition(partition, settings.partitions, "--partition")
    with _store(settings) as store:
        records = store.malformed_records(partition, from_offset=from_offset, limit=limit)
    if as_json:
        echo_json([_as_dict(record) for record in records])
        return
    if not records:
        echo_err("no malformed records are kept")
        return
    echo_table(
        ["PARTITION", "OFFSET", "SET_ASIDE", "KEY", "VALUE", "REASON"],
        [
            [
                record.partition,
                record.offset,
                iso(record.seen_ms),
                _text(record.key),
                _text(record.value),
                record.reason,
            ]
            for record in records
        ],
        max_width=40,
    )


@malformed.command("show")
@click.argument("partition", type=click.IntRange(min=0))
@click.argument("offset", type=click.IntRange(min=0))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@click.option("--raw", is_flag=True, help="Write the kept value's bytes to stdout, nothing else.")
@pass_state
def show(state: CliState, partition: int, offset: int, as_json: bool, raw: bool) -> None:
    """Everything kept of one record: why it was refused, its key, its whole value (up to 64 KiB),
    its timestamp, and when it was set aside."""
    if as_json and raw:
        raise click.UsageError("give --json or --raw, not both")
    settings = state.settings()
    check_partition(partition, settings.partitions, "PARTITION")
    with _store(settings) as store:
        record = _find(store, partition, offset)
    if record is None:
        raise SchedulerError(
            f"no malformed record is kept at partition {partition} offset {offset} (it may have "
            "expired or been dropped); list them with `scheduler malformed list`"
        )
    if raw:
        sys.stdout.buffer.write(record.value or b"")
        sys.stdout.buffer.flush()
        return
    details = _as_dict(record)
    if as_json:
        echo_json(details)
        return
    for name, value in details.items():
        click.echo(f"{name + ':':<14}{'-' if value is None else value}")


@malformed.command("drop")
@click.argument("partition", type=click.IntRange(min=0), required=False)
@click.argument("offsets", nargs=-1, type=click.IntRange(min=0))
@click.option(
    "--all",
    "drop_all",
    is_flag=True,
    help="Forget every kept record (of PARTITION, if given) instead of the OFFSETS named.",
)
@pass_state
def drop(state: CliState, partition: int | None, offsets: Sequence[int], drop_all: bool) -> None:
    """Forget kept malformed records once they are dealt with: PARTITION OFFSET [OFFSET...],
    or --all [PARTITION]."""
    if drop_all and offsets:
        raise click.UsageError("give OFFSETS or --all, not both")
    if not drop_all and (partition is None or not offsets):
        raise click.UsageError("name the records (PARTITION OFFSET [OFFSET...]) or give --all")
    settings = state.settings()
    check_partition(partition, settings.partitions, "PARTITION")
    with _store(settings) as store:
        if drop_all:
            dropped = _drop_every(store, partition)
        else:
            assert partition is not None
            wanted = sorted(set(offsets))
            kept = _kept_offsets(store, partition, wanted)
            missing = [offset for offset in wanted if offset not in kept]
            if missing:
                raise SchedulerError(
                    f"no malformed record is kept at partition {partition} offset(s) "
                    f"{', '.join(map(str, missing))}; nothing was dropped (see `scheduler "
                    "malformed list`)"
                )
            store.drop_malformed(partition, wanted)
            dropped = len(wanted)
    click.echo(f"dropped {dropped} malformed record(s)")


def _find(store: TaskStore, partition: int, offset: int) -> MalformedRecord | None:
    found = store.malformed_records(partition, from_offset=offset, limit=1)
    if found and found[0].offset == offset:  # else the next kept one is another record
        return found[0]
    return None


def _kept_offsets(store: TaskStore, partition: int, wanted: list[int]) -> set[int]:
    """Which of the sorted offsets `wanted` the store keeps for `partition`: read forward from
    the first in pages, up to the last (a look-up per offset lists the table's keys each time)."""
    kept: set[int] = set()
    offset, last = wanted[0], wanted[-1]
    while offset <= last:
        page = store.malformed_records(partition, from_offset=offset, limit=_DROP_PAGE)
        kept.update(record.offset for record in page if record.offset <= last)
        if len(page) < _DROP_PAGE:
            break
        offset = page[-1].offset + 1
    return kept


def _drop_every(store: TaskStore, partition: int | None) -> int:
    dropped = 0
    while True:
        page = store.malformed_records(partition, limit=_DROP_PAGE)
        if not page:
            return dropped
        by_partition: dict[int, list[int]] = {}
        for record in page:
            by_partition.setdefault(record.partition, []).append(record.offset)
        for number, offsets in by_partition.items():
            store.drop_malformed(number, offsets)
        dropped += len(page)


def _store(settings: Settings) -> closing[TaskStore]:
    from scheduler.runtime import open_existing_store

    return closing(open_existing_store(settings))


def _text(data: bytes | None) -> str | None:
    """Bytes as readable text: UTF-8 where it is, escapes for the bytes that are not and for
    control characters (which would otherwise reach the operator's terminal)."""
    if data is None:
        return None
    text = data.decode("utf-8", errors="backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _as_dict(record: MalformedRecord) -> dict[str, Any]:
    return {
        "partition": record.partition,
        "offset": record.offset,
        "reason": record.reason,
        "key": _text(record.key),
        "value": _text(record.value),
        "value_bytes": record.value_bytes,
        "value_cut": record.value is not None and len(record.value) < record.value_bytes,
        "record_time": iso(record.timestamp_ms),
        "set_aside": iso(record.seen_ms),
    }
