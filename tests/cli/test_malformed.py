"""`scheduler malformed`: what workers set aside, as an operator finds it once logs are gone."""

from __future__ import annotations

import json
import subprocess

from scheduler.config import load_settings
from scheduler.partitioning import partition_for
from scheduler.runtime import build_log, open_store
from scheduler.stores.abc import MalformedRecord
from tests.cli.conftest import SCRIPT
from tests.cli.helpers import wait_for

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def keep(*records: MalformedRecord) -> None:
    store = open_store(load_settings())
    try:
        store.set_aside(records)
    finally:
        store.close()


def record(partition: int, offset: int, value: bytes = b"not json") -> MalformedRecord:
    return MalformedRecord.of(
        partition,
        offset,
        reason="record value is not JSON: Expecting value",
        key=b"acct",
        value=value,
        timestamp_ms=T0,
        seen_ms=T0 + 1000,
    )


def test_a_record_a_worker_could_not_decode_is_listed_and_shown(script, worker, embedded):
    """End to end: another producer's bytes go onto the log; the worker sets them aside; the
    operator lists them and gets the exact bytes back; the partition's next task still runs."""
    log = build_log(load_settings())
    try:
        log.ensure_topic(4)
        producer = log.producer()
        try:
            producer.send(b"acct", b"\xff\x00 from another producer").result(10)
        finally:
            producer.close()
    finally:
        log.close()
    enqueued = script("enqueue", "acct", "--key", "after-it")
    assert enqueued.returncode == 0, enqueued.stderr
    running = worker()

    def listed() -> list:
        result = script("malformed", "list", "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    assert wait_for(lambda: bool(listed()), timeout=60)
    (kept,) = listed()
    partition = partition_for(b"acct", 4)
    assert (kept["partition"], kept["offset"], kept["key"]) == (partition, 0, "acct")
    assert kept["value"] == "\\xff\\x00 from another producer"
    assert "not UTF-8" in kept["reason"] or "not JSON" in kept["reason"], kept["reason"]

    def ran() -> bool:
        listing = script("tasks", "list", "--ordering-id", "acct", "--json")
        return [t["state"] for t in json.loads(listing.stdout or "[]")] == ["succeeded"]

    assert wait_for(ran, timeout=60)
    running.terminate()
    assert running.wait(timeout=30) == 0
    # --raw writes the value's bytes as they were, for a fixed copy to be enqueued again.
    raw = subprocess.run(
        [SCRIPT, "malformed", "show", str(partition), "0", "--raw"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert raw.stdout == b"\xff\x00 from another producer"


def test_list_pages_by_partition_and_offset_and_says_when_none_are_kept(run, embedded):
    assert run("topic", "create").exit_code == 0  # a deployment, with nothing set aside yet
    empty = run("malformed", "list")
    assert empty.exit_code == 0
    assert "no malformed records are kept" in empty.output
    keep(record(1, 9), record(1, 4), record(0, 2, value=b"x" * 300))

    table = run("malformed", "list").output.splitlines()
    assert table[0].split() == ["PARTITION", "OFFSET", "SET_ASIDE", "KEY", "VALUE", "REASON"]
    assert [line.split()[:2] for line in table[1:]] == [["0", "2"], ["1", "4"], ["1", "9"]]
    assert "2026-01-01T00:00:01.000Z" in table[1]

    page = json.loads(
        run("malformed", "list", "--partition", "1", "--from-offset", "5", "--json").output
    )
    assert [(r["partition"], r["offset"]) for r in page] == [(1, 9)]
    assert json.loads(run("malformed", "list", "--limit", "1", "--json").output)[0]["offset"] == 2
    # `group status`, where an operator looks first, says that some are kept.
    status = run("group", "status")
    assert status.exit_code == 0, status.output
    assert (
        "note: 3 malformed record(s) on partition(s) 0, 1 were set aside; see `scheduler "
        "malformed list`" in status.output
    )


def test_show_gives_every_field_and_names_a_missing_record(run, embedded):
    keep(record(2, 7))

    shown = run("malformed", "show", "2", "7")
    assert shown.exit_code == 0
    assert "reason:       record value is not JSON: Expecting value" in shown.output
    assert "value:        not json" in shown.output
    assert "record_time:  2026-01-01T00:00:00.000Z" in shown.output
    details = json.loads(run("malformed", "show", "2", "7", "--json").output)
    assert (details["value_bytes"], details["value_cut"]) == (8, False)

    missing = run("malformed", "show", "2", "6")
    assert missing.exit_code == 2
    assert "no malformed record is kept at partition 2 offset 6" in missing.output
    beyond = run("malformed", "show", "4", "0")
    assert beyond.exit_code == 2
    assert "4 is not a partition; there are 4 (0 to 3)" in beyond.output


def test_drop_forgets_named_records_or_all_and_refuses_unknown_ones(run, embedded):
    keep(record(0, 1), record(0, 2), record(3, 5), record(3, 6))

    unknown = run("malformed", "drop", "0", "1", "3")
    assert unknown.exit_code == 2
    assert "offset(s) 3; nothing was dropped" in unknown.output
    assert len(json.loads(run("malformed", "list", "--json").output)) == 4

    assert "dropped 1 malformed record(s)" in run("malformed", "drop", "0", "1").output
    assert "dropped 2 malformed record(s)" in run("malformed", "drop", "--all", "3").output
    left = json.loads(run("malformed", "list", "--json").output)
    assert [(r["partition"], r["offset"]) for r in left] == [(0, 2)]
    assert "dropped 1 malformed record(s)" in run("malformed", "drop", "--all").output
    assert run("malformed", "list", "--json").output.strip() == "[]"

    usage = run("malformed", "drop", "0")
    assert usage.exit_code == 2
    assert "name the records (PARTITION OFFSET [OFFSET...]) or give --all" in usage.output


def test_drop_checks_the_named_offsets_page_by_page(run, embedded, monkeypatch):
    from scheduler.cli import malformed

    monkeypatch.setattr(malformed, "_DROP_PAGE", 2)  # so that the check needs several pages
    keep(*(record(0, offset) for offset in (1, 2, 4, 7, 9, 12)), record(1, 8))

    # 8 is kept, but on partition 1; 13 is past the last kept record of partition 0.
    unknown = run("malformed", "drop", "0", "9", "1", "8", "13")
    assert unknown.exit_code == 2
    assert "offset(s) 8, 13; nothing was dropped" in unknown.output

    assert "dropped 3 malformed record(s)" in run("malformed", "drop", "0", "12", "1", "7").output
    left = json.loads(run("malformed", "list", "--json").output)
    assert [(r["partition"], r["offset"]) for r in left] == [(0, 2), (0, 4), (0, 9), (1, 8)]


def test_a_record_missing_a_field_is_set_aside_naming_the_field(script, worker, embedded):
    log = build_log(load_settings())
    try:
        log.ensure_topic(4)
        producer = log.producer()
        try:
            value = json.dumps({"v": 1, "op": "schedule", "oid": "acct", "at": T0}).encode()
            producer.send(b"acct", value).result(10)
        finally:
            producer.close()
    finally:
        log.close()
    worker()

    def listed() -> list:
        result = script("malformed", "list", "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    assert wait_for(lambda: bool(listed()), timeout=60)
    (kept,) = listed()
    assert "record has no 'uk' (the uniqueness key)" in kept["reason"], kept["reason"]
    assert "NoneType" not in kept["reason"]
