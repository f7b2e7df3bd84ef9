"""Adapters built from settings, and the partition-count guard."""

from __future__ import annotations

import io
import json
import logging

import pytest

from scheduler.config import load_settings
from scheduler.errors import ConfigurationError, PartitionCountMismatchError
from scheduler.executors.abc import noop_executor
from scheduler.logging_setup import configure_logging
from scheduler.runtime import (
    build_executor,
    build_log,
    cassandra_contact,
    new_store_check,
    open_store,
    partition_count_check,
    store_partition_check,
)


def test_a_changed_partition_count_is_refused_naming_both_counts(embedded, monkeypatch):
    settings = load_settings()
    log, store = build_log(settings), open_store(settings)
    try:
        assert partition_count_check(log, store, 4) == 4
        with pytest.raises(
            PartitionCountMismatchError, match=r"4 partitions but SCHEDULER_PARTITIONS=8"
        ):
            partition_count_check(log, store, 8)
    finally:
        log.close()
        store.close()


def test_the_stored_partition_count_is_checked_too(embedded, monkeypatch):
    settings = load_settings()
    store = open_store(settings)
    store.claim_meta("partition_count", "6")
    log = build_log(settings)
    try:
        with pytest.raises(PartitionCountMismatchError, match=r"pinned to 6 partitions"):
            partition_count_check(log, store, 4)
    finally:
        log.close()
        store.close()


def test_a_new_store_is_refused_to_a_group_that_has_read_records_into_another(embedded):
    settings = load_settings()
    log, store = build_log(settings), open_store(settings)
    try:
        new_store_check(log, store, settings)  # no topic yet: nothing read
        log.ensure_topic(settings.partitions)
        new_store_check(log, store, settings)  # a topic, nothing committed
        log.commit(settings.group_id, {1: 3, 2: 4})
        with pytest.raises(ConfigurationError) as raised:
            new_store_check(log, store, settings)
        message = str(raised.value)
        assert f"group {settings.group_id!r} has already read 7 records of topic" in message
        assert f"{embedded.resolve() / 'store.db'} (SCHEDULER_DATA_DIR), is new" in message
        assert "use a new group (SCHEDULER_GROUP_ID)" in message
        log.commit("another-group", {1: 3})
        new_store_check(log, store, settings.model_copy(update={"group_id": "a-new-group"}))
        store.claim_meta("partition_count", str(settings.partitions))  # a worker's start
        new_store_check(log, store, settings)
    finally:
        log.close()
        store.close()


def test_a_store_pinned_while_its_group_is_asked_about_is_not_new(embedded):
    """A worker pins the count before it commits: commits that show up between the two looks
    at the store were made through it, by a worker that started beside this one."""
    settings = load_settings()
    log, store = build_log(settings), open_store(settings)
    log.ensure_topic(settings.partitions)
    log.commit(settings.group_id, {0: 5})
    answers = iter([None, str(settings.partitions)])
    store.read_meta = lambda name: next(answers)  # type: ignore[method-assign]
    try:
        new_store_check(log, store, settings)
    finally:
        log.close()
        store.close()


def test_topic_move_is_refused_on_the_embedded_log(embedded, run):
    result = run("topic", "move", "--to", "elsewhere")
    assert result.exit_code == 2
    assert "for a Kafka task log (SCHEDULER_LOG=kafka)" in result.output


def test_executors_resolve_by_name_and_by_path(embedded, monkeypatch):
    assert build_executor(load_settings()) is noop_executor
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "scheduler.executors.abc:noop_executor")
    assert build_executor(load_settings()) is noop_executor
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "scheduler.executors.abc:missing")
    with pytest.raises(ConfigurationError, match=r"SCHEDULER_EXECUTOR=.*has no 'missing'"):
        build_executor(load_settings())


def test_cassandra_hosts_with_ports_give_one_port(monkeypatch):
    monkeypatch.setenv("SCHEDULER_CASSANDRA_HOSTS", "a:9043,b:9043")
    assert cassandra_contact(load_settings()) == (["a", "b"], 9043)
    monkeypatch.setenv("SCHEDULER_CASSANDRA_HOSTS", "a:9043,b:9044")
    with pytest.raises(ConfigurationError, match="same one"):
        cassandra_contact(load_settings())


def test_cassandra_hosts_in_ipv6_forms_and_a_bad_port(monkeypatch):
    monkeypatch.delenv("SCHEDULER_CASSANDRA_PORT", raising=False)
    monkeypatch.setenv("SCHEDULER_CASSANDRA_HOSTS", "[::1]:9043,[fe80::2]")
    assert cassandra_contact(load_settings()) == (["::1", "fe80::2"], 9043)
    monkeypatch.setenv("SCHEDULER_CASSANDRA_HOSTS", "::1")
    assert cassandra_contact(load_settings()) == (["::1"], 9042)
    monkeypatch.setenv("SCHEDULER_CASSANDRA_HOSTS", "127.0.0.1:abc")
    with pytest.raises(ConfigurationError, match=r"SCHEDULER_CASSANDRA_HOSTS.*'abc', not a number"):
        cassandra_contact(load_settings())


def test_json_logs_carry_the_extra_fields():
    stream = io.StringIO()
    configure_logging("INFO", "json", stream=stream)
    try:
        logging.getLogger("scheduler.test").info("fired %s", "x", extra={"partition": 3})
    finally:
        configure_logging("WARNING", "text")
    line = json.loads(stream.getvalue().splitlines()[-1])
    assert line["message"] == "fired x" and line["partition"] == 3
    assert line["level"] == "INFO" and line["logger"] == "scheduler.test"
    assert line["ts"].endswith("Z")


def test_uvicorns_coloured_copy_of_a_message_is_not_printed_as_a_field():
    stream = io.StringIO()
    configure_logging("INFO", "text", stream=stream)
    try:
        # uvicorn's own loggers may be configured by an API test in this process: another name.
        logging.getLogger("scheduler.test").info(
            "Started server process [%d]",
            7,
            extra={"color_message": "Started server process [\x1b[36m%d\x1b[0m]", "port": 1},
        )
    finally:
        configure_logging("WARNING", "text")
    line = stream.getvalue().splitlines()[-1]
    assert line.endswith("scheduler.test: Started server process [7] port=1")


def test_pykka_failure_lines_of_partition_actors_are_left_to_the_supervisor():
    import scheduler.worker  # noqa: F401  (imports every actor, as a worker does)
    from scheduler.actors.base import PartitionActor
    from scheduler.logging_setup import REPORTED_ACTORS

    assert {cls.__name__ for cls in PartitionActor.__subclasses__()} == REPORTED_ACTORS
    stream = io.StringIO()
    configure_logging("INFO", "text", stream=stream)
    try:
        pykka_log = logging.getLogger("pykka")
        try:
            raise RuntimeError("store gone")
        except RuntimeError:
            pykka_log.error("Unhandled exception in TaskPersistence (urn:uuid:1):", exc_info=True)
            pykka_log.error("Unhandled exception in TopicSupervisor (urn:uuid:2):", exc_info=True)
    finally:
        configure_logging("WARNING", "text")
    written = stream.getvalue()
    assert "TaskPersistence" not in written  # the TopicSupervisor says "partition N failed"
    assert "Unhandled exception in TopicSupervisor" in written and "store gone" in written


def test_the_drivers_reconnect_warnings_show_once_a_minute_per_node_with_the_count_held_back():
    from scheduler.logging_setup import RepeatedReconnectWarnings

    now = [0.0]
    held_back = RepeatedReconnectWarnings(clock=lambda: now[0])
    pool = logging.getLogger("cassandra.pool")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(held_back)
    pool.addHandler(handler)
    try:
        for second in range(0, 65, 5):  # a node down for a minute, tried every 5 s
            now[0] = second
            for node in ("10.0.0.1:9042", "10.0.0.2:9042"):
                pool.warning(
                    "Error attempting to reconnect to %s, scheduling retry in %s seconds: %s",
                    node,
                    5.0,
                    ConnectionRefusedError(111, "Connection refused"),
                )
        pool.warning("Host %s has been marked down", "10.0.0.1:9042")  # other lines pass
    finally:
        pool.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 5, lines
    assert lines[0].startswith("Error attempting to reconnect to 10.0.0.1:9042, scheduling")
    assert lines[1].startswith("Error attempting to reconnect to 10.0.0.2:9042, scheduling")
    assert lines[2].endswith("Connection refused (11 more such lines held back since the last)")
    assert "10.0.0.1:9042" in lines[2] and "10.0.0.2:9042" in lines[3]
    assert lines[4] == "Host 10.0.0.1:9042 has been marked down"


def test_a_command_that_only_reads_the_count_leaves_an_empty_store_unpinned(embedded):
    """`scheduler topic move` reads the stored count; a store no worker used keeps none."""
    store = open_store(load_settings())
    try:
        assert store_partition_check(store, 4, pin=False) == 4
        assert store.read_meta("partition_count") is None
        store.claim_meta("partition_count", "6")
        with pytest.raises(PartitionCountMismatchError, match="set SCHEDULER_PARTITIONS=6"):
            store_partition_check(store, 4, pin=False)
    finally:
        store.close()
