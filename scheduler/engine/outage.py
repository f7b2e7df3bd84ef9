"""A store outage as a state of the partition, not a crash.

When the store refuses a partition's batch, the partition enters OUTAGE: the poll loop pauses
its consumption (`LogConsumer.pause`), keeps the batch it read (nothing is rewound or read
again), and probes the store by writing that batch again, after a delay that doubles with
each failure in a row (`Backoff`, on the engine's clock). The first probe that succeeds
commits the batch's offsets and resumes the partition (`LogConsumer.resume`) where it stood:

    RUNNING --write past the wait--> WRITING(held batch, its write under way)
    RUNNING --persist refused------> OUTAGE(held batch, failures=1, probe at +base)
    WRITING --the write fails------> OUTAGE(failures+1, probe at +min(cap, base * 2**failures))
    OUTAGE  --probe due------------> WRITING (the probe is the write under way)
    WRITING --the write succeeds---> RUNNING (offsets committed, consumption resumed)
    any     --revoked/lost---------> gone (uncommitted: the next owner reads the batch from the log)

The poll loop never waits on a write here: it looks at the write's future on each turn. A
write that fails on a bug (any error but a refusal) has the partition's tree restarted, and
its batch is held the same way until the new tree takes it.

The partition's actor tree stays up through a refusal, with its held and running tasks and the
status changes it has not written yet. `PartitionOutages` is the one place that logs an
outage: its first failure, its repeats once a minute (`RepeatedFailures`), and its end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler import metrics
from scheduler.codec import Command
from scheduler.engine.clock import Clock
from scheduler.engine.repeats import RepeatedFailures
from scheduler.stores.abc import MalformedRecord
from scheduler.wording import counted

if TYPE_CHECKING:
    from pykka import Future

logger = logging.getLogger("scheduler.worker")

MAX_BACKOFF_S = 5.0
"""The longest wait between two probes (also how long a partition may stay paused after its
store is back, so it stays short)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """The one backoff policy of outages and restarts: `base_s`, doubled for each further
    failure in a row, at most `max_s`."""

    base_s: float
    max_s: float = MAX_BACKOFF_S

    def delay(self, failures: int) -> float:
        """The wait after `failures` failures in a row (1 for the first)."""
        return min(self.max_s, self.base_s * 2.0 ** (max(failures, 1) - 1))


@dataclass(slots=True)
class HeldBatch:
    """What a partition in OUTAGE read from the log and has not stored yet."""

    commands: list[Command]
    malformed: list[MalformedRecord]
    """Its records nobody can run, to keep in the store before the offsets are committed."""
    next_offset: int
    """The offset to commit once all of it is stored."""


@dataclass(slots=True)
class Outage:
    """One partition's OUTAGE state."""

    batch: HeldBatch
    failures: int
    """Failed attempts in a row, the first write included."""
    probe_at: float
    """When (the clock's `monotonic`) the next probe is due."""
    since: float
    write: Future[int] | None = None
    """The write of the batch under way (a persist past the poll loop's wait, or a probe)."""
    writing: HeldBatch | None = None
    """What that write holds: records held after it was sent wait for the next write."""
    sent_at: float = 0.0


_REFUSED = (
    "could not persist a batch of partition %d (%s); the partition is paused, holding its %s, "
    "and the store is probed again in %.1f s, and again, later and later, while it refuses"
)
_BUG = (
    "a bug failed the write of a batch of partition %d (%s); its actor tree is restarted, and "
    "the partition stays paused, holding its %s, which are written to the new tree in %.1f s "
    "or later"
)


class PartitionOutages:
    """The partitions of one worker that are in OUTAGE; owned by the poll loop's thread."""

    def __init__(self, clock: Clock, backoff: Backoff) -> None:
        self._clock = clock
        self.backoff = backoff
        self._outages: dict[int, Outage] = {}
        self._repeats = RepeatedFailures(
            logger,
            "could not persist batches of partitions {partitions} {count} more times in the last "
            "{seconds:.0f} s (the latest: {error}); each stays paused, holding what it read, and "
            f"probes the store every {backoff.max_s:g} s at most",
            clock=clock.monotonic,
        )

    def __contains__(self, partition: object) -> bool:
        return partition in self._outages

    def failures(self) -> dict[int, int]:
        """Per partition in OUTAGE, its failed attempts in a row; from any thread."""
        outages = sorted(self._outages.copy().items())
        return {p: outage.failures for p, outage in outages if outage.failures}

    def enter(
        self, partition: int, batch: HeldBatch, error: BaseException, *, bug: bool = False
    ) -> None:
        """The store refused `batch` (or a bug failed it): hold it, probe later (the caller
        pauses the partition)."""
        now = self._clock.monotonic()
        self._outages[partition] = Outage(batch, 0, now, now)
        self.failed(partition, error, bug=bug)

    def writing(self, partition: int, batch: HeldBatch, write: Future[int]) -> None:
        """`batch`'s write did not answer within the poll loop's wait: hold the batch while it
        goes on (the caller pauses the partition)."""
        now = self._clock.monotonic()
        self._outages[partition] = Outage(batch, 0, now, now)
        self.sent(partition, write)
        logger.info(
            "the store has not yet answered the write of a batch of partition %d; the partition "
            "is paused until it does, and the poll loop goes on",
            partition,
            extra={"partition": partition},
        )

    def sent(self, partition: int, write: Future[int]) -> None:
        """The partition's held batch is being written by `write` (a probe)."""
        outage = self._outages[partition]
        batch = outage.batch
        outage.write, outage.sent_at = write, self._clock.monotonic()
        outage.writing = HeldBatch(list(batch.commands), list(batch.malformed), batch.next_offset)

    def hold_more(self, partition: int, batch: HeldBatch) -> None:
        """Records of a partition in OUTAGE that the log returned after all (already on their
        way when it was paused): held behind."""
        held = self._outages[partition].batch
        held.commands += batch.commands
        held.malformed += batch.malformed
        held.next_offset = max(held.next_offset, batch.next_offset)

    def due(self) -> list[tuple[int, HeldBatch]]:
        """The partitions whose probe is due now (and no write under way), with what they hold."""
        now = self._clock.monotonic()
        return [
            (p, o.batch)
            for p, o in sorted(self._outages.items())
            if o.write is None and o.probe_at <= now
        ]

    def writes(self) -> list[tuple[int, Future[int], float]]:
        """The writes under way: partition, future, and seconds since it was sent."""
        now = self._clock.monotonic()
        return [
            (p, o.write, now - o.sent_at)
            for p, o in sorted(self._outages.items())
            if o.write is not None
        ]

    def failed(self, partition: int, error: BaseException, *, bug: bool = False) -> None:
        """A write failed: wait longer before the next. The first failure of an outage, and
        every bug, is logged in full; a bug with its traceback. Only a tree's write can fail
        on a bug; the worker's own calls are refusals."""
        metrics.PERSIST_FAILURES.inc()
        outage = self._outages[partition]
        outage.failures += 1
        outage.write = outage.writing = None
        delay = self.backoff.delay(outage.failures)
        outage.probe_at = self._clock.monotonic() + delay
        if not bug and outage.failures > 1:
            self._repeats.failed_again(partition, error)
            return
        logger.error(
            _BUG if bug else _REFUSED,
            partition,
            _said(error),
            counted(len(outage.batch.commands) + len(outage.batch.malformed), "record"),
            delay,
            exc_info=error if bug else None,
            extra={"partition": partition},
        )

    def stored(self, partition: int) -> int:
        """The write under way succeeded: returns the offset to commit. The outage ends (said
        in the log) unless records were held after the write was sent: those are probed now."""
        outage = self._outages[partition]
        batch = outage.batch
        done = outage.writing or batch  # None: stored without a write of its tree
        outage.write = outage.writing = None
        if batch.next_offset > done.next_offset:
            batch.commands = batch.commands[len(done.commands) :]
            batch.malformed = batch.malformed[len(done.malformed) :]
            outage.probe_at = self._clock.monotonic()
            return done.next_offset
        del self._outages[partition]
        if outage.failures:
            logger.warning(
                "partition %d is persisting again after %s in %.1f s; resuming its consumption",
                partition,
                counted(outage.failures, "failed attempt"),
                self._clock.monotonic() - outage.since,
                extra={"partition": partition},
            )
        return done.next_offset

    def forget(self, partitions: Iterable[int]) -> None:
        """These partitions left: what they held is read again by their next owner."""
        for partition in partitions:
            self._outages.pop(partition, None)


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


_partition_log = logging.getLogger("scheduler.partition")
_TREE_REPEATS = RepeatedFailures(
    _partition_log,
    "the store refused partitions {partitions} {count} more times in the last {seconds:.0f} s "
    "(the latest: {error}); each stays in OUTAGE, starting nothing, and probes the store every "
    f"{MAX_BACKOFF_S:g} s at most",
)


class StoreProbe:
    """Whether the store refuses one kind of a partition's calls (status writes, loads), and
    when to try again; kept by the actor that makes those calls, whose next call is the probe."""

    def __init__(
        self,
        what: str,
        partition: int,
        backoff: Backoff,
        clock: Clock,
        on_change: Callable[[str, bool], object],
    ) -> None:
        self.what = what
        self._partition = partition
        self._backoff = backoff
        self._clock = clock
        self._on_change = on_change
        """Told (`what`, True) at each refusal and (`what`, False) when the outage ends."""
        self.failures = 0
        """Refusals in a row; 0 while the store answers."""
        self._since = 0.0
        self._probe_at = 0.0

    @property
    def down(self) -> bool:
        return self.failures > 0

    def due(self) -> bool:
        """Whether the next probe may be made now (always, while the store answers)."""
        return self._clock.monotonic() >= self._probe_at

    def refused(self, error: BaseException) -> float:
        """The store refused a call: returns the wait before the next probe."""
        self.failures += 1
        now = self._clock.monotonic()
        delay = self._backoff.delay(self.failures)
        self._probe_at = now + delay
        if self.failures == 1:
            self._since = now
            _partition_log.error(
                "partition %d is in OUTAGE: the store refuses its %s (%s); no attempt starts, "
                "what it holds stays, and the store is probed again in %.1f s, and again, later "
                "and later, while it refuses",
                self._partition,
                self.what,
                _said(error),
                delay,
                extra={"partition": self._partition},
            )
        else:
            _TREE_REPEATS.failed_again(self._partition, error)
        self._on_change(self.what, True)
        return delay

    def answered(self) -> bool:
        """The store took a call: True if that ends an outage (said in the log, and told)."""
        if not self.failures:
            return False
        _partition_log.warning(
            "partition %d: the store takes its %s again after %s in %.1f s; the partition resumes",
            self._partition,
            self.what,
            counted(self.failures, "refusal"),
            self._clock.monotonic() - self._since,
            extra={"partition": self._partition},
        )
        self.failures = 0
        self._on_change(self.what, False)
        return True
