"""Commit metadata that names the topic ID it was committed on (`kafka_topic_id`)."""

from __future__ import annotations

from scheduler.engine.reload_mark import MAX_ENCODED_BYTES, ReloadMark
from scheduler.logs.kafka_topic_id import committed_elsewhere, known, tagged, untagged
from scheduler.model import TaskKey

MARK = ReloadMark((1700, "orders-1", "u1"), (TaskKey.from_ms("orders-2", 1500, "u2"),)).encode()


def test_a_tagged_mark_comes_back_whole_with_the_id_it_was_committed_on() -> None:
    text = tagged("iwjezUXlTMO7/KEqS0S/fQ", MARK)
    assert untagged(text) == ("iwjezUXlTMO7/KEqS0S/fQ", MARK)
    assert ReloadMark.decode(untagged(text)[1]) == ReloadMark.decode(MARK)
    assert untagged(tagged("id", "")) == ("id", "")


def test_metadata_without_an_id_is_taken_as_it_is() -> None:
    # Commits of earlier versions, of Kafka's own tools, or made while the ID was unknown.
    assert untagged(MARK) == (None, MARK)
    assert untagged("") == (None, "")
    assert tagged(None, MARK) == MARK


def test_only_a_commit_naming_another_id_is_one_of_a_deleted_topic() -> None:
    assert committed_elsewhere(tagged("old", MARK), "new") == "old"
    assert committed_elsewhere(tagged("new", MARK), "new") is None
    assert committed_elsewhere(MARK, "new") is None  # names none: trusted
    assert committed_elsewhere(tagged("old", MARK), None) is None  # the topic's ID unknown


def test_the_all_zero_id_of_brokers_without_topic_ids_is_no_id() -> None:
    assert known("AAAAAAAAAAAAAAAAAAAAAA") is None
    assert known("") is None
    assert known("6XyV7VqTReekLbpxNv79PQ") == "6XyV7VqTReekLbpxNv79PQ"


def test_the_longest_mark_tagged_stays_within_what_kafka_keeps_of_a_commit() -> None:
    stragglers = tuple(TaskKey.from_ms("o" * 200, 1000 + n, "u" * 36) for n in range(32))
    longest = ReloadMark((2000, "o" * 200, "u" * 36), stragglers).encode()
    assert len(longest.encode()) > MAX_ENCODED_BYTES - 300  # as long as a mark gets
    assert len(tagged("6XyV7VqTReekLbpxNv79PQ", longest).encode()) <= 4096  # Kafka's default
