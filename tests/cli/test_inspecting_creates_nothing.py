"""Commands that look at a deployment, or change what it holds, never create one: a mistyped
data directory, keyspace or topic is named at once instead of answered from an empty one made on
the spot (which also left a stray keyspace and topic behind). Commands that add to a deployment
(`enqueue`, `schedules create` and `apply`, `jobs load`) may begin an embedded one."""

from __future__ import annotations

import pytest

LOOKING = [
    ("tasks", "list"),
    ("tasks", "show", "acct", "2026-11-23T10:00:00Z", "k"),
    ("tasks", "cancel", "acct", "2026-11-23T10:00:00Z", "k"),
    ("group", "status"),
    ("malformed", "list"),
    ("schedules", "list"),
    ("schedules", "enable", "tick"),
    ("jobs", "list"),
]


@pytest.mark.parametrize("command", LOOKING, ids=" ".join)
def test_an_embedded_data_dir_nothing_ran_in_is_named_and_left_uncreated(run, embedded, command):
    result = run(*command)
    assert result.exit_code == 2, result.output
    assert f"no scheduler data in {embedded}" in result.output
    assert "SCHEDULER_DATA_DIR" in result.output
    assert not embedded.exists()


@pytest.mark.kafka
@pytest.mark.cassandra
def test_a_mistyped_keyspace_or_topic_is_named_and_neither_is_created(
    run, distributed, monkeypatch
):
    from scheduler.config import load_settings
    from scheduler.errors import ConfigurationError
    from scheduler.runtime import build_log, open_store

    for command in LOOKING:
        result = run(*command)
        assert result.exit_code == 2, (command, result.output)
        keyspace = distributed["SCHEDULER_CASSANDRA_KEYSPACE"]
        assert f"keyspace {keyspace!r} does not exist" in result.output
    with pytest.raises(ConfigurationError, match="does not exist"):
        open_store(load_settings(), create_schema=False)

    assert run("schema", "apply").exit_code == 0  # the keyspace exists; the topic does not
    for command in [("tasks", "list"), ("group", "status"), ("tasks", "cancel", *LOOKING[2][2:])]:
        result = run(*command)
        assert result.exit_code == 2, (command, result.output)
        assert f"Kafka topic {distributed['SCHEDULER_TOPIC']!r} does not exist" in result.output
    log = build_log(load_settings())
    try:
        with pytest.raises(ConfigurationError, match="does not exist"):
            log.partition_count()
    finally:
        log.close()
