"""A partition's status buffer wakes its writer once per flush, not once per change, and never
leaves a change without a flush to come."""

from __future__ import annotations

from scheduler import TaskState
from scheduler.actors.unflushed import UnflushedStatuses
from scheduler.model import TaskKey, TaskStatus

FULL_AT = 3


def status(n: int) -> TaskStatus:
    return TaskStatus(TaskKey.from_ms("o", n, f"u{n}"), TaskState.RUNNING, 1, updated_ms=n)


def test_the_writer_is_woken_by_the_first_change_after_a_flush_only() -> None:
    buffer = UnflushedStatuses()
    woken = []
    for n in range(2):
        buffer.put([status(n)])
        woken.append(buffer.wake_writer(FULL_AT))
    assert woken == [True, False]


def test_a_full_buffer_wakes_the_writer_once_more() -> None:
    buffer = UnflushedStatuses()
    woken = []
    for n in range(5):
        buffer.put([status(n)])
        woken.append(buffer.wake_writer(FULL_AT))
    assert woken == [True, False, True, False, False]


def test_a_change_put_while_a_flush_writes_wakes_the_writer_again() -> None:
    buffer = UnflushedStatuses()
    buffer.put([status(1)])
    assert buffer.wake_writer(FULL_AT)
    taken = buffer.waiting()  # the writer's flush takes its batch...
    buffer.put([status(2)])  # ...a change comes in while it writes...
    buffer.written(taken)
    assert buffer.wake_writer(FULL_AT)  # ...and is not left behind
    assert [s.key for s in buffer.waiting()] == [status(2).key]


def test_changes_put_without_waking_do_not_keep_the_next_from_waking_the_writer() -> None:
    buffer = UnflushedStatuses()
    buffer.put([status(1)])  # a put that does not wake (a stopping executor's cancellations)
    buffer.put([status(2)])
    assert buffer.wake_writer(FULL_AT)
