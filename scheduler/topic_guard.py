"""What a worker checks about the topic itself, beside reading it: `TopicGuard`.

The store keeps every task under the partition its record came from, and a task's partition is
`murmur2(ordering id) % partition count`. The worker looks for what breaks that silently:

* a record on another partition than its ordering id's: kept and run, but said loudly;
* partitions added to the topic (or the topic created again with another count): the worker
  stops before storing anything the change moved (`scheduler topic move` is the way back);
* the topic deleted, or created again under its name: its offsets are the old topic's, so it
  stops;
* records the topic's retention deleted before any worker stored them: lost, and said so.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor

from scheduler import metrics
from scheduler.codec import Command
from scheduler.errors import SchedulerError, TopicMissingError, TopicReplacedError
from scheduler.logs.abc import LogConsumer, LogRecord, TaskLog
from scheduler.partitioning import partition_for
from scheduler.runtime import topic_changed_error

logger = logging.getLogger("scheduler.worker")  # the worker's lines, under the worker's name

_HOMES_CACHED = 100_000
"""Ordering ids whose partition is remembered; past that the cache starts again."""
_MISROUTED_LOG_EVERY = 1000
"""A partition's first misrouted record is logged, then one in this many."""
_COUNT_CHECK_EVERY_S = 10.0
"""At most this often a misrouted record makes the guard ask for the topic's partition count."""
_SKIP_CHECK_EVERY_S = 10.0
"""After a skipped offset that deleted nothing, the partition's next skip is checked no sooner
(transaction markers leave a gap before almost every batch)."""
_TOPIC_CHECK_EVERY_S = 10.0
"""How often a worker asks whether its topic is still the one it started on."""


class TopicGuard:
    """The topic checks of one worker; used on its polling thread."""

    def __init__(self, log: TaskLog) -> None:
        self.log = log
        self.partition_count: int | None = None
        """The topic's count when the worker started; None (unchecked) if the log could not say."""
        self._homes: dict[str, int] = {}  # each ordering id's partition, cached
        self._misrouted_counts: dict[int, int] = defaultdict(int)
        self._next_count_check = 0.0
        self._expected: dict[int, int] = {}
        """Per owned partition, the offset of the next record it should read."""
        self._next_skip_check: dict[int, float] = {}
        self.topic_id: str | None = None
        """The topic's ID when the worker started; None (unchecked) if the log has none."""
        self._next_topic_check = 0.0
        self._topic_asked: Future[str | None] | None = None
        self._asker: ThreadPoolExecutor | None = None
        self._missing_once = False
        self._reported: dict[int, int] = {}
        """Per partition, the offset up to which deleted records were reported (counted once)."""

    def start(self) -> None:
        try:
            self.partition_count = self.log.partition_count()
        except Exception as error:  # best effort: without it, records' partitions go unchecked
            logger.warning("cannot check records' partitions: %s", error)
        try:
            self.topic_id = self.log.topic_id()
        except SchedulerError as error:
            logger.warning("cannot tell if topic %r is deleted later: %s", self.log.topic, error)
        self._next_topic_check = time.monotonic() + _TOPIC_CHECK_EVERY_S

    def check_topic(self, *, now_and_certain: bool = False) -> None:
        """Raise `TopicReplacedError` if the topic was deleted, or deleted and created again,
        since the worker started; asks every `_TOPIC_CHECK_EVERY_S` at most.

        The poll loop must never wait on the log, so the question goes to a thread of the
        guard's and its answer is judged on the first call after it came. Missing at two
        answers in a row, the topic was deleted; a new ID is certain at once.
        `now_and_certain` asks, waits, and takes a missing topic as deleted."""
        if self.topic_id is None:
            return
        if now_and_certain:
            self._judge(self._ask(), certain=True)
            return
        asked = self._topic_asked
        if asked is not None:
            if asked.done():
                self._topic_asked = None
                self._judge(asked, certain=False)
            return
        now = time.monotonic()
        if now < self._next_topic_check:
            return
        self._next_topic_check = now + _TOPIC_CHECK_EVERY_S
        self._topic_asked = self._ask()

    def _ask(self) -> Future[str | None]:
        if self._asker is None:
            self._asker = ThreadPoolExecutor(1, thread_name_prefix="topic-check")
        return self._asker.submit(self.log.topic_id)

    def _judge(self, answer: Future[str | None], *, certain: bool) -> None:
        try:
            topic_id = answer.result()
        except TopicMissingError:
            if not self._missing_once and not certain:
                self._missing_once = True
                return
            raise self._replaced("deleted") from None
        except SchedulerError as error:  # unreachable: the consumer says so, and retries
            logger.debug("cannot check the ID of topic %r: %s", self.log.topic, error)
            return
        self._missing_once = False
        if topic_id is not None and topic_id != self.topic_id:
            raise self._replaced("deleted and created again")

    def close(self) -> None:
        """Stop asking; a question still out is left to finish on its own."""
        if self._asker is not None:
            self._asker.shutdown(wait=False, cancel_futures=True)

    def _replaced(self, how: str) -> TopicReplacedError:
        return TopicReplacedError(
            f"{self.log.location} was {how} while this worker ran (its ID was "
            f"{self.topic_id}): the records on it that no worker had stored yet went with it. "
            "The worker stops rather than go on with offsets of the old topic. Start the "
            "workers again: they create the topic if it is missing (with SCHEDULER_PARTITIONS "
            "partitions) and read the new one from its first record"
        )

    def check_record(self, record: LogRecord, command: Command) -> None:
        """Warn about a misrouted record; raise if the topic's partition count changed."""
        home = self._home(command.task.key.ordering_id)
        if home is not None and home != record.partition:
            self._check_partition_count()  # raises, before anything of the batch is stored
            self._misrouted(record, command, home)

    def check_assigned(self, consumer: LogConsumer, partitions: list[int]) -> None:
        """Raise if `partitions` include some the topic did not have at start; report records
        deleted before the group committed past them."""
        if self.partition_count is not None and max(partitions) >= self.partition_count:
            actual = max(self._topic_partition_count(), max(partitions) + 1)
            raise topic_changed_error(self.log.topic, actual, self.partition_count)
        self._report_deleted_unread(consumer, partitions)

    def check_read(self, firsts: dict[int, int], lasts: dict[int, int]) -> None:
        """A batch read `firsts[p]` to `lasts[p]` of each partition p: report records it skipped
        because the log had deleted them."""
        for partition, first in firsts.items():
            expected = self._expected.get(partition)
            if expected is not None and first > expected:
                self._check_skipped(partition, expected, first)
            self._expected[partition] = lasts[partition] + 1

    def forget(self, partitions: Collection[int]) -> None:
        """`partitions` are not this worker's any more."""
        for partition in partitions:
            self._expected.pop(partition, None)
            self._next_skip_check.pop(partition, None)

    def _home(self, ordering_id: str) -> int | None:
        """The partition `schedule_task` sends `ordering_id` to (None if the count is unknown)."""
        home = self._homes.get(ordering_id)
        if home is None and self.partition_count is not None:
            if len(self._homes) >= _HOMES_CACHED:
                self._homes.clear()
            home = partition_for(ordering_id.encode(), self.partition_count)
            self._homes[ordering_id] = home
        return home

    def _check_partition_count(self) -> None:
        """Raise if the topic's partition count is not the one at start (added partitions make
        records look misrouted long before the consumer's metadata refresh)."""
        now = time.monotonic()
        if self.partition_count is None or now < self._next_count_check:
            return
        self._next_count_check = now + _COUNT_CHECK_EVERY_S
        actual = self._topic_partition_count()
        if actual != self.partition_count:
            raise topic_changed_error(self.log.topic, actual, self.partition_count)

    def _topic_partition_count(self) -> int:
        """The topic's partition count now; the one at start if the log cannot say."""
        assert self.partition_count is not None
        try:
            return self.log.partition_count()
        except SchedulerError as error:
            logger.warning("cannot check the topic's partition count: %s", error)
            return self.partition_count

    def _misrouted(self, record: LogRecord, command: Command, home: int) -> None:
        """A valid task on a partition other than its ordering id's: kept and run (its producer
        saw it accepted), but said loudly."""
        metrics.MISROUTED.inc()
        self._misrouted_counts[record.partition] += 1
        count = self._misrouted_counts[record.partition]
        if count == 1 or count % _MISROUTED_LOG_EVERY == 0:
            logger.warning(
                "record at partition %d offset %d is for ordering id %r, whose partition is %d "
                "(%d such records on partition %d so far): its producer does not partition by "
                "Kafka's default murmur2 hash of the key, so the task runs out of order with its "
                "ordering id's other tasks and lookups by key do not find it; key records by "
                "ordering id and use murmur2 (librdkafka clients: partitioner=murmur2_random)",
                record.partition,
                record.offset,
                command.task.key.ordering_id,
                home,
                count,
                record.partition,
                extra={"partition": record.partition, "offset": record.offset},
            )

    def _report_deleted_unread(self, consumer: LogConsumer, partitions: Collection[int]) -> None:
        """Say so if the log deleted records of `partitions` the group never committed past
        (the consumer would skip them without a word). Best effort."""
        try:
            committed = consumer.committed(partitions)
            first = self.log.first_offsets(partitions)
        except SchedulerError as error:
            logger.warning("cannot check partitions %s for deleted records: %s", partitions, error)
            return
        for partition in partitions:
            offset, left = committed.get(partition), first.get(partition, 0)
            self._expected[partition] = left if offset is None else max(offset, left)
            if offset is not None and left > offset:
                self._log_deleted(partition, offset, left)

    def _check_skipped(self, partition: int, expected: int, read: int) -> None:
        """Offsets `expected` to `read - 1` were not read: deleted, or only a gap; the log's
        first offset tells which. Best effort."""
        now = time.monotonic()
        if now < self._next_skip_check.get(partition, 0.0):
            return
        try:
            left = self.log.first_offsets([partition]).get(partition, 0)
        except SchedulerError as error:
            logger.warning("cannot check partition %d for deleted records: %s", partition, error)
            return
        if left > expected:
            self._log_deleted(partition, expected, min(left, read))
        else:
            self._next_skip_check[partition] = now + _SKIP_CHECK_EVERY_S

    def _log_deleted(self, partition: int, missing: int, left: int) -> None:
        """Records `missing` to `left - 1` of `partition` are gone before anyone stored them."""
        missing = max(missing, self._reported.get(partition, missing))
        if left <= missing:
            return
        self._reported[partition] = left
        deleted = left - missing
        metrics.RECORDS_DELETED_UNREAD.inc(deleted)
        logger.error(
            "partition %d: %d records (offsets %d to %d) were deleted from topic %r by its "
            "retention before any worker stored them; their tasks and admin operations are "
            "lost, and reading goes on from offset %d. Keep the topic's retention (retention.ms"
            ", retention.bytes) longer than the workers may be down or behind; `scheduler "
            "group status` shows how far behind they are",
            partition,
            deleted,
            missing,
            left - 1,
            self.log.topic,
            left,
            extra={"partition": partition},
        )
