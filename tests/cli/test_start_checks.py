"""Start-up checks that never trap, through the installed `scheduler` command: a refused start
pins nothing, so the setting its error names works on the next start; a closed Kafka port fails
at once; the wait for a silent broker is a setting."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable

import pytest

from scheduler.config import load_settings
from scheduler.runtime import PARTITION_COUNT_META, open_store
from tests.cli.helpers import wait_for
from tests.other_server import other_server

Script = Callable[..., subprocess.CompletedProcess[str]]


def pinned_count() -> str | None:
    """The partition count the store of the current settings is pinned to, if any."""
    store = open_store(load_settings())
    try:
        return store.read_meta(PARTITION_COUNT_META)
    finally:
        store.close()


def owned_partitions(script: Script) -> list[int]:
    result = script("group", "status", "--json")
    if result.returncode != 0:
        return []
    return [row["partition"] for row in json.loads(result.stdout) if row["owner"]]


@pytest.mark.parametrize(
    "backends",
    [
        "embedded",
        pytest.param("distributed", marks=[pytest.mark.kafka, pytest.mark.cassandra]),
    ],
)
def test_a_worker_refused_for_the_topics_count_pins_nothing_and_the_count_it_names_starts(
    backends: str, request: pytest.FixtureRequest, script: Script, worker, monkeypatch
) -> None:
    request.getfixturevalue(backends)
    monkeypatch.setenv("SCHEDULER_PARTITIONS", "4")
    created = script("topic", "create")
    assert created.returncode == 0, created.stderr

    monkeypatch.setenv("SCHEDULER_PARTITIONS", "8")
    refused = worker()
    _, stderr = refused.communicate(timeout=120)
    assert refused.returncode == 2, stderr
    assert "has 4 partitions but SCHEDULER_PARTITIONS=8" in stderr
    assert "set SCHEDULER_PARTITIONS=4" in stderr
    assert "Traceback" not in stderr
    assert pinned_count() is None  # the store was made, and holds no count

    monkeypatch.setenv("SCHEDULER_PARTITIONS", "4")  # what the error said
    running = worker()
    assert wait_for(lambda: owned_partitions(script) == [0, 1, 2, 3] or running.poll() is not None)
    assert running.poll() is None, running.communicate()[1]
    assert pinned_count() == "4"
    running.terminate()
    assert running.wait(timeout=60) == 0


def test_a_store_pinned_to_another_count_says_what_it_holds_and_the_count_that_works(
    embedded, script: Script, monkeypatch
) -> None:
    monkeypatch.setenv("SCHEDULER_PARTITIONS", "4")
    created = script("topic", "create")
    assert created.returncode == 0, created.stderr
    enqueued = script("enqueue", "orders-1", "--in", "1h")  # the log exists: a store may open
    assert enqueued.returncode == 0, enqueued.stderr
    store = open_store(load_settings())
    try:
        store.claim_meta(PARTITION_COUNT_META, "4")
    finally:
        store.close()

    monkeypatch.setenv("SCHEDULER_PARTITIONS", "6")
    listed = script("tasks", "list")
    assert listed.returncode == 2
    assert "the task store is pinned to 4 partitions but SCHEDULER_PARTITIONS=6" in listed.stderr
    assert "set SCHEDULER_PARTITIONS=4" in listed.stderr
    assert "partitioned into" not in listed.stderr  # it says what the store holds: a count


@pytest.mark.parametrize("command", [("enqueue", "orders-1", "--in", "1h"), ("worker",)])
def test_a_closed_kafka_port_fails_at_once_whatever_the_wait_allowed(
    embedded, script: Script, monkeypatch, command: tuple[str, ...]
) -> None:
    monkeypatch.setenv("SCHEDULER_LOG", "kafka")
    monkeypatch.setenv("SCHEDULER_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    monkeypatch.setenv("SCHEDULER_KAFKA_CONNECT_TIMEOUT_S", "120")
    started = time.monotonic()
    result = script(*command, timeout=120)
    took = time.monotonic() - started
    assert result.returncode == 3, result.stderr
    assert "connection to 127.0.0.1:1 refused" in result.stderr
    # The setting and a value that works, as the error gives them.
    assert "Point SCHEDULER_KAFKA_BOOTSTRAP at" in result.stderr
    assert "127.0.0.1:9092" in result.stderr
    assert took < 60, f"took {took:.1f} s: the wait of 120 s was not cut short"


def test_the_wait_for_brokers_that_take_the_connection_and_never_answer_is_a_setting(
    embedded, script: Script, monkeypatch
) -> None:
    monkeypatch.setenv("SCHEDULER_LOG", "kafka")
    with other_server() as port:
        monkeypatch.setenv("SCHEDULER_KAFKA_BOOTSTRAP", f"127.0.0.1:{port}")
        monkeypatch.setenv("SCHEDULER_KAFKA_CONNECT_TIMEOUT_S", "1.5")
        result = script("enqueue", "orders-1", "--in", "1h", timeout=120)
    assert result.returncode == 3, result.stderr
    assert "within 1.5 s (SCHEDULER_KAFKA_CONNECT_TIMEOUT_S=1.5;" in result.stderr
    assert "never answered Kafka's first request" in result.stderr


@pytest.mark.parametrize("file_setting", ["SCHEDULER_PROGRAMS_FILE", "SCHEDULER_BATCH_FILE"])
def test_a_worker_whose_executor_cannot_route_its_files_is_refused_before_it_starts(
    file_setting: str, embedded, script: Script, monkeypatch, tmp_path
) -> None:
    # Started anyway, it would fail every run or batch load permanently ("unknown executor").
    monkeypatch.setenv(file_setting, str(tmp_path / "work.file"))
    refused = script("worker", "--executor", "command")
    assert refused.returncode == 2, refused.stderr
    setting = file_setting.removeprefix("SCHEDULER_").lower()
    assert f"{setting} is set, but executor 'command' runs only its own tasks" in refused.stderr
    assert "Set SCHEDULER_EXECUTOR=auto" in refused.stderr and "Traceback" not in refused.stderr
    assert "started in group" not in refused.stderr
