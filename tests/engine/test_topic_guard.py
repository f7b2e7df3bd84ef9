"""`TopicGuard.check_read`: records skipped because the log deleted them, told from mere gaps."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Iterator

import pytest

from scheduler import metrics
from scheduler.errors import BackendUnavailableError, TopicMissingError, TopicReplacedError
from scheduler.topic_guard import TopicGuard


class FirstOffsets:
    """The part of a `TaskLog` the check asks: each partition's first offset, counted."""

    topic = "tasks"
    location = "topic 'tasks'"

    def __init__(self) -> None:
        self.first: dict[int, int] = {}
        self.asked = 0

    def first_offsets(self, partitions: Collection[int]) -> dict[int, int]:
        self.asked += 1
        return {p: self.first.get(p, 0) for p in partitions}


@pytest.fixture
def log() -> FirstOffsets:
    return FirstOffsets()


@pytest.fixture
def guard(log: FirstOffsets) -> TopicGuard:
    return TopicGuard(log)  # type: ignore[arg-type]


def deleted_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "were deleted" in r.getMessage()]


def test_a_batch_starting_past_the_first_record_left_reports_the_records_between(
    guard: TopicGuard, log: FirstOffsets, caplog: pytest.LogCaptureFixture
) -> None:
    before = metrics.RECORDS_DELETED_UNREAD._value.get()
    guard.check_read({2: 0}, {2: 9})
    log.first[2] = 25
    with caplog.at_level(logging.ERROR, logger="scheduler.worker"):
        guard.check_read({2: 25}, {2: 30})
    [line] = deleted_lines(caplog)
    assert "partition 2: 15 records (offsets 10 to 24)" in line
    assert "reading goes on from offset 25" in line
    assert metrics.RECORDS_DELETED_UNREAD._value.get() - before == 15


def test_a_gap_the_log_did_not_delete_is_no_loss_and_is_not_asked_about_again_at_once(
    guard: TopicGuard, log: FirstOffsets, caplog: pytest.LogCaptureFixture
) -> None:
    # A transactional producer's commit marker sits at offset 5.
    with caplog.at_level(logging.ERROR, logger="scheduler.worker"):
        guard.check_read({0: 0}, {0: 4})
        guard.check_read({0: 6}, {0: 10})
        guard.check_read({0: 12}, {0: 20})
    assert deleted_lines(caplog) == []
    assert log.asked == 1


def test_a_partition_forgotten_or_never_read_is_not_checked(
    guard: TopicGuard, log: FirstOffsets
) -> None:
    guard.check_read({3: 40}, {3: 50})  # nothing known of partition 3 before
    guard.forget([3])
    guard.check_read({3: 90}, {3: 95})  # owned again: the assignment checks it, not this
    assert log.asked == 0


class Incarnations(FirstOffsets):
    """A log whose topic's ID changes, vanishes or cannot be read, as a test says; its answer
    waits while `hold` is clear (a broker that does not answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.id: str | Exception | None = "first-id"
        self.hold = threading.Event()
        self.hold.set()

    def partition_count(self) -> int:
        return 4

    def topic_id(self) -> str | None:
        self.hold.wait(30)
        if isinstance(self.id, Exception):
            raise self.id
        return self.id


@pytest.fixture
def topic(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TopicGuard, Incarnations]]:
    monkeypatch.setattr("scheduler.topic_guard._TOPIC_CHECK_EVERY_S", 0.0)
    log = Incarnations()
    guard = TopicGuard(log)  # type: ignore[arg-type]
    guard.start()
    yield guard, log
    log.hold.set()
    guard.close()


def checked(guard: TopicGuard) -> None:
    """One whole check: the poll loop's turn that asks, and the turn after the answer came,
    which judges it (the question goes to a thread, so that the loop never waits on it)."""
    guard.check_topic()
    asked = guard._topic_asked
    assert asked is not None, "the guard did not ask"
    asked.exception(timeout=10)  # answered, one way or the other
    guard.check_topic()


def test_a_topic_created_again_under_its_name_stops_the_worker_at_once(
    topic: tuple[TopicGuard, Incarnations],
) -> None:
    guard, log = topic
    checked(guard)
    log.id = "second-id"
    with pytest.raises(TopicReplacedError, match="was deleted and created again while") as error:
        checked(guard)
    assert "first-id" in str(error.value) and "Start the workers again" in str(error.value)


def test_a_topic_missing_at_two_checks_in_a_row_stops_the_worker_and_once_does_not(
    topic: tuple[TopicGuard, Incarnations],
) -> None:
    guard, log = topic
    log.id = TopicMissingError("no such topic")
    checked(guard)  # a broker that does not know it yet, perhaps
    log.id = "first-id"
    checked(guard)
    log.id = TopicMissingError("no such topic")
    checked(guard)
    with pytest.raises(TopicReplacedError, match="'tasks' was deleted while this worker ran"):
        checked(guard)


def test_a_caller_that_saw_the_data_dir_go_is_answered_at_once_without_a_second_look() -> None:
    """The worker, on finding its store's file deleted, asks whether the log went too (`rm -r`
    of the data dir): that error, which covers both, must come now, not 10 s later."""
    log = Incarnations()
    guard = TopicGuard(log)  # type: ignore[arg-type]
    guard.start()  # the next regular check is 10 s away
    log.id = TopicMissingError("no such topic")
    guard.check_topic()  # too early: not even asked
    assert guard._topic_asked is None
    with pytest.raises(TopicReplacedError, match="was deleted while this worker ran"):
        guard.check_topic(now_and_certain=True)
    log.id = "first-id"
    guard.check_topic(now_and_certain=True)  # still there: nothing to say


def test_an_unreachable_log_or_one_without_topic_ids_leaves_the_topic_unchecked(
    topic: tuple[TopicGuard, Incarnations],
) -> None:
    guard, log = topic
    for _ in range(3):
        log.id = BackendUnavailableError("brokers down")
        checked(guard)
    log.id = None  # an embedded log
    later = TopicGuard(log)  # type: ignore[arg-type]
    later.start()
    log.id = TopicMissingError("no such topic")
    later.check_topic()
    later.check_topic()
    assert later._topic_asked is None  # nothing to compare with: never asked


def test_the_poll_loop_never_waits_for_the_logs_answer(
    topic: tuple[TopicGuard, Incarnations],
) -> None:
    """A broker that does not answer (a Kafka outage) held the worker's poll loop for the whole
    request timeout, and its health probes reported it stalled (CI, 2026-11-26)."""
    guard, log = topic
    log.hold.clear()
    log.id = "second-id"
    started = time.monotonic()
    for _ in range(100):  # the poll loop's turns while the answer does not come
        guard.check_topic()
    assert time.monotonic() - started < 1.0
    log.hold.set()
    guard._topic_asked.exception(timeout=10)  # type: ignore[union-attr]
    with pytest.raises(TopicReplacedError, match="deleted and created again"):
        guard.check_topic()  # the turn after the answer came
