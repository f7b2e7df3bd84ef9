"""The TaskStore contract, run against every adapter (see the `task_store` fixture)."""

from __future__ import annotations

import random
import time

from scheduler.model import Attempt, AttemptOutcome, TaskKey, TaskState, TaskStatus, iso_ms
from scheduler.model import Task as _Task
from scheduler.stores.abc import MALFORMED_KEPT_BYTES, MalformedRecord, TaskStore
from scheduler.stores.cassandra_schema import MALFORMED_BLOCK
from tests.contracts.conftest import BUCKET_MS

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, on a bucket boundary
FAR_FUTURE_MS = BASE_MS + 10 * 365 * 86_400_000
DAY_MS = 86_400_000


def task(ordering_id: str, ms: int, uniqueness_key: str = "u", **data: object) -> _Task:
    return _Task.from_key(TaskKey.from_ms(ordering_id, ms, uniqueness_key), data)


def keys_of(stored: list) -> list[TaskKey]:
    return [row.task.key for row in stored]


def load_all(store: TaskStore, partition: int, page: int = 1000) -> list:
    return store.load_tasks(partition, None, FAR_FUTURE_MS, page)


def test_an_open_store_that_answers_has_no_problem(task_store: TaskStore) -> None:
    task_store.write_tasks(0, [task("a", BASE_MS)])
    assert task_store.problem() is None


# -- schedule rows -------------------------------------------------------------------------


def test_load_reads_forward_from_the_cursor_across_buckets(task_store: TaskStore) -> None:
    tasks = [task(f"o{i % 3}", BASE_MS + i * BUCKET_MS // 3, f"u{i}", i=i) for i in range(10)]
    shuffled = tasks[:]
    random.Random(7).shuffle(shuffled)
    task_store.write_tasks(1, shuffled)

    pages, cursor = [], None
    while True:
        page = task_store.load_tasks(1, cursor, FAR_FUTURE_MS, 4)
        if not page:
            break
        pages.append(page)
        cursor = page[-1].task.key.cursor

    assert [len(page) for page in pages] == [4, 4, 2]
    loaded = [row.task for page in pages for row in page]
    assert loaded == sorted(tasks, key=lambda t: t.key)
    assert {t.scheduled_ms // BUCKET_MS for t in loaded} == {
        BASE_MS // BUCKET_MS + b for b in range(4)
    }


def test_load_stops_at_until_ms_inclusive(task_store: TaskStore) -> None:
    task_store.write_tasks(0, [task("a", BASE_MS + i * 1000) for i in range(5)])

    loaded = task_store.load_tasks(0, None, BASE_MS + 2000, 100)

    assert [row.task.scheduled_ms for row in loaded] == [BASE_MS, BASE_MS + 1000, BASE_MS + 2000]


def test_load_orders_equal_times_by_ordering_id_then_uniqueness_key(
    task_store: TaskStore,
) -> None:
    same_time = [task("b", BASE_MS, "2"), task("a", BASE_MS, "9"), task("b", BASE_MS, "1")]
    task_store.write_tasks(0, same_time)

    after_first = task_store.load_tasks(0, (BASE_MS, "a", "9"), BASE_MS, 9)

    assert [str(k) for k in keys_of(load_all(task_store, 0))] == [
        f"a/{iso_ms(BASE_MS)}/9",
        f"b/{iso_ms(BASE_MS)}/1",
        f"b/{iso_ms(BASE_MS)}/2",
    ]
    assert [k.uniqueness_key for k in keys_of(after_first)] == ["1", "2"]


def test_rows_older_than_any_bucket_window_are_found(task_store: TaskStore) -> None:
    old = [task("a", BASE_MS - 400 * DAY_MS), task("b", BASE_MS - 30 * DAY_MS), task("c", BASE_MS)]
    task_store.write_tasks(2, old)

    assert [row.task for row in load_all(task_store, 2)] == old
    assert task_store.count_due(2, BASE_MS) == 3


def test_writing_a_key_again_overwrites_its_data(task_store: TaskStore) -> None:
    task_store.write_tasks(0, [task("a", BASE_MS, version=1)])
    task_store.write_tasks(0, [task("a", BASE_MS, version=2, nested={"list": [1, "x", None]})])

    loaded = load_all(task_store, 0)

    assert len(loaded) == 1
    assert loaded[0].task.data == {"version": 2, "nested": {"list": [1, "x", None]}}
    assert loaded[0].status is None


def test_partitions_do_not_see_each_others_rows(task_store: TaskStore) -> None:
    task_store.write_tasks(0, [task("a", BASE_MS)])
    task_store.write_tasks(1, [task("b", BASE_MS)])

    assert [k.ordering_id for k in keys_of(load_all(task_store, 0))] == ["a"]
    assert [k.ordering_id for k in keys_of(load_all(task_store, 1))] == ["b"]
    assert task_store.count_due(3, FAR_FUTURE_MS) == 0


def test_keys_keep_unicode_and_punctuation(task_store: TaskStore) -> None:
    odd = task("schedule:Ünïcode/✓ 'quoted'", BASE_MS, 'key "with" quotes;--', text="é✓")
    task_store.write_tasks(0, [odd])

    assert [row.task for row in load_all(task_store, 0)] == [odd]


def test_delete_tasks_removes_rows_and_ignores_missing_ones(task_store: TaskStore) -> None:
    a, b = task("a", BASE_MS), task("b", BASE_MS + BUCKET_MS)
    task_store.write_tasks(0, [a, b])

    task_store.delete_tasks(0, [a.key, TaskKey.from_ms("missing", BASE_MS, "u")])

    assert keys_of(load_all(task_store, 0)) == [b.key]


def test_count_due(task_store: TaskStore) -> None:
    task_store.write_tasks(0, [task("a", BASE_MS + i * BUCKET_MS // 2) for i in range(6)])

    assert task_store.count_due(0, BASE_MS - 1) == 0
    assert task_store.count_due(0, BASE_MS) == 1
    assert task_store.count_due(0, BASE_MS + BUCKET_MS) == 3
    assert task_store.count_due(0, FAR_FUTURE_MS) == 6


def test_count_due_after_a_cursor_counts_only_the_rows_past_it(task_store: TaskStore) -> None:
    rows = [task("a", BASE_MS + i * BUCKET_MS // 2) for i in range(6)]
    task_store.write_tasks(0, [*rows, task("b", BASE_MS + BUCKET_MS // 2)])

    after = rows[1].key.cursor  # ("a", 1 half bucket): "b" at the same time sorts after it
    assert task_store.count_due(0, FAR_FUTURE_MS, after=after) == 5
    assert task_store.count_due(0, BASE_MS + BUCKET_MS, after=after) == 2
    assert task_store.count_due(0, BASE_MS, after=after) == 0
    assert task_store.count_due(0, FAR_FUTURE_MS, after=(BASE_MS - 5 * DAY_MS, "", "")) == 7


# -- status rows ---------------------------------------------------------------------------


def test_load_keys_returns_the_rows_that_exist_in_order_with_their_statuses(
    task_store: TaskStore,
) -> None:
    old, late, done = task("a", BASE_MS - 3 * DAY_MS), task("b", BASE_MS, "x"), task("c", BASE_MS)
    task_store.write_tasks(4, [late, old, done])
    retrying = TaskStatus(old.key, TaskState.RETRYING, attempts=3, next_attempt_ms=BASE_MS)
    task_store.record_statuses(4, [retrying, TaskStatus(done.key, TaskState.SUCCEEDED)])
    never_written = TaskKey.from_ms("d", BASE_MS + 1, "u")

    loaded = task_store.load_keys(4, [late.key, never_written, done.key, old.key, late.key])

    assert [(row.task, row.status) for row in loaded] == [(old, retrying), (late, None)]
    assert task_store.load_keys(5, [old.key]) == []  # another partition's row
    assert task_store.load_keys(4, []) == []


def test_load_joins_each_row_with_its_status(task_store: TaskStore) -> None:
    a, b = task("a", BASE_MS), task("b", BASE_MS + 1)
    task_store.write_tasks(0, [a, b])
    retrying = TaskStatus(
        a.key,
        TaskState.RETRYING,
        attempts=2,
        last_error="boom",
        next_attempt_ms=BASE_MS + 5000,
        updated_ms=BASE_MS + 10,
    )
    task_store.record_statuses(0, [retrying])

    loaded = load_all(task_store, 0)

    assert [(row.task, row.status) for row in loaded] == [(a, retrying), (b, None)]


def test_a_final_status_removes_the_schedule_row(task_store: TaskStore) -> None:
    done, failed, running = task("a", BASE_MS), task("b", BASE_MS + 1), task("c", BASE_MS + 2)
    task_store.write_tasks(0, [done, failed, running])

    task_store.record_statuses(
        0,
        [
            TaskStatus(done.key, TaskState.SUCCEEDED, attempts=1, updated_ms=BASE_MS),
            TaskStatus(failed.key, TaskState.FAILED, attempts=5, last_error="x", data={"k": 1}),
            TaskStatus(running.key, TaskState.RUNNING, attempts=1),
        ],
    )

    assert keys_of(load_all(task_store, 0)) == [running.key]
    assert task_store.count_due(0, FAR_FUTURE_MS) == 1
    statuses = task_store.fetch_statuses(0, [done.key, failed.key, running.key])
    assert {k: s.state for k, s in statuses.items()} == {
        done.key: TaskState.SUCCEEDED,
        failed.key: TaskState.FAILED,
        running.key: TaskState.RUNNING,
    }
    assert statuses[failed.key].data == {"k": 1}


def test_status_rows_keep_every_field(task_store: TaskStore) -> None:
    key = TaskKey.from_ms("a", BASE_MS, "u")
    status = TaskStatus(
        key,
        TaskState.RETRYING,
        attempts=3,
        last_error="Traceback ...\nValueError: é",
        next_attempt_ms=BASE_MS + 60_000,
        updated_ms=BASE_MS + 5,
        data={"job": "daily", "args": [1, 2]},
    )
    task_store.record_statuses(0, [status])

    assert task_store.fetch_statuses(0, [key]) == {key: status}


def test_a_later_status_replaces_the_earlier_one(task_store: TaskStore) -> None:
    key = TaskKey.from_ms("a", BASE_MS, "u")
    task_store.record_statuses(0, [TaskStatus(key, TaskState.RETRYING, 1, "first", BASE_MS + 9)])
    task_store.record_statuses(0, [TaskStatus(key, TaskState.RUNNING, 2)])

    assert task_store.fetch_statuses(0, [key]) == {key: TaskStatus(key, TaskState.RUNNING, 2)}


def test_fetch_statuses_omits_keys_without_a_row(task_store: TaskStore) -> None:
    known, unknown = TaskKey.from_ms("a", BASE_MS, "u"), TaskKey.from_ms("b", BASE_MS, "u")
    task_store.record_statuses(0, [TaskStatus(known, TaskState.RUNNING)])

    assert set(task_store.fetch_statuses(0, [known, unknown])) == {known}
    assert task_store.fetch_statuses(1, [known]) == {}
    assert task_store.fetch_statuses(0, []) == {}


def test_fetch_statuses_finds_the_few_known_keys_among_many(task_store: TaskStore) -> None:
    keys = [TaskKey.from_ms(f"o{n % 7}", BASE_MS + n * 997, f"u{n}") for n in range(1_234)]
    known = keys[::100]  # spread over buckets and over the adapters' look-up chunks
    task_store.record_statuses(0, [TaskStatus(key, TaskState.SUCCEEDED, 1) for key in known])

    found = task_store.fetch_statuses(0, keys + known)  # duplicates are harmless

    assert found == {key: TaskStatus(key, TaskState.SUCCEEDED, 1) for key in known}


def test_delete_statuses_forgets_them(task_store: TaskStore) -> None:
    key = TaskKey.from_ms("a", BASE_MS, "u")
    task_store.record_statuses(0, [TaskStatus(key, TaskState.FAILED, 3, data={})])

    task_store.delete_statuses(0, [key, TaskKey.from_ms("missing", BASE_MS, "u")])

    assert task_store.fetch_statuses(0, [key]) == {}
    assert task_store.list_tasks(0) == []


def test_expired_status_rows_are_invisible(short_retention_task_store: TaskStore) -> None:
    store = short_retention_task_store
    pending, done = task("a", BASE_MS), task("b", BASE_MS)
    store.write_tasks(0, [pending])
    store.record_statuses(
        0,
        [
            TaskStatus(pending.key, TaskState.RETRYING, 1, "x", BASE_MS),
            TaskStatus(done.key, TaskState.SUCCEEDED, 1),
        ],
    )
    assert set(store.fetch_statuses(0, [pending.key, done.key])) == {pending.key, done.key}

    deadline = time.monotonic() + 20
    while store.fetch_statuses(0, [pending.key, done.key]) and time.monotonic() < deadline:
        time.sleep(0.1)

    assert store.fetch_statuses(0, [pending.key, done.key]) == {}
    assert [(row.task, row.status) for row in load_all(store, 0)] == [(pending, None)]
    assert [view.task.key for view in store.list_tasks(0)] == [pending.key]


# -- attempt records ------------------------------------------------------------------------


def started(number: int, at_ms: int, worker: str = "w1") -> Attempt:
    return Attempt(number, started_ms=at_ms, worker=worker)


def test_an_attempt_written_at_its_start_and_at_its_end_keeps_both(task_store: TaskStore) -> None:
    key = TaskKey.from_ms("a", BASE_MS, "u")
    task_store.record_statuses(
        0,
        [
            TaskStatus(
                key, TaskState.RUNNING, 1, updated_ms=BASE_MS, attempt_log=(started(1, BASE_MS),)
            )
        ],
    )
    assert task_store.attempts(0, key) == [Attempt(1, BASE_MS, worker="w1")]

    end = Attempt(
        1,
        ended_ms=BASE_MS + 1500,
        outcome=AttemptOutcome.FAILED,
        exit_code=3,
        error="CommandFailedError: exited with code 3 é",
        log_path="/logs/a/attempt-1.out",
    )
    task_store.record_statuses(
        0,
        [
            TaskStatus(
                key, TaskState.RETRYING, 1, "x", BASE_MS + 9_000, BASE_MS + 1500, attempt_log=(end,)
            )
        ],
    )

    (kept,) = task_store.attempts(0, key)
    assert kept == Attempt(
        1,
        BASE_MS,
        BASE_MS + 1500,
        AttemptOutcome.FAILED,
        3,
        "CommandFailedError: exited with code 3 é",
        "w1",
        "/logs/a/attempt-1.out",
    )
    assert kept.duration_ms == 1500
    # The status read back is the status row alone: history is read by `attempts`.
    assert task_store.fetch_statuses(0, [key])[key].attempt_log == ()


def test_every_attempt_of_one_batch_is_kept_though_the_batch_keeps_one_status(
    task_store: TaskStore,
) -> None:
    key = TaskKey.from_ms("a", BASE_MS, "u")
    first_end = Attempt(1, ended_ms=BASE_MS + 5, outcome=AttemptOutcome.TIMED_OUT, error="slow")
    task_store.record_statuses(
        0,
        [
            TaskStatus(key, TaskState.RUNNING, 1, attempt_log=(started(1, BASE_MS),)),
            TaskStatus(key, TaskState.RETRYING, 1, "slow", BASE_MS + 6, attempt_log=(first_end,)),
            TaskStatus(key, TaskState.RUNNING, 2, attempt_log=(started(2, BASE_MS + 6, "w2"),)),
        ],
    )

    assert task_store.fetch_statuses(0, [key])[key].state is TaskState.RUNNING
    assert task_store.attempts(0, key) == [
        Attempt(1, BASE_MS, BASE_MS + 5, AttemptOutcome.TIMED_OUT, None, "slow", "w1"),
        Attempt(2, BASE_MS + 6, worker="w2"),
    ]


def test_attempts_are_kept_per_task_and_partition(task_store: TaskStore) -> None:
    one, other = TaskKey.from_ms("a", BASE_MS, "u"), TaskKey.from_ms("a", BASE_MS, "v")
    task_store.record_statuses(
        0, [TaskStatus(one, TaskState.RUNNING, 1, attempt_log=(started(1, 7),))]
    )
    task_store.record_statuses(
        1, [TaskStatus(one, TaskState.RUNNING, 1, attempt_log=(started(1, 8),))]
    )

    assert [a.started_ms for a in task_store.attempts(0, one)] == [7]
    assert [a.started_ms for a in task_store.attempts(1, one)] == [8]
    assert task_store.attempts(0, other) == []


def test_a_succeeded_task_keeps_its_data_and_attempts_after_its_schedule_row_goes(
    task_store: TaskStore,
) -> None:
    done = task("a", BASE_MS, n=1)
    task_store.write_tasks(0, [done])
    finished = Attempt(1, BASE_MS, BASE_MS + 20, AttemptOutcome.SUCCEEDED, 0, worker="w1")
    task_store.record_statuses(
        0,
        [TaskStatus(done.key, TaskState.SUCCEEDED, 1, data={"n": 1}, attempt_log=(finished,))],
    )

    (view,) = task_store.list_tasks(0)
    assert (view.task.data, view.state) == ({"n": 1}, TaskState.SUCCEEDED)
    assert task_store.attempts(0, done.key) == [finished]


def test_delete_statuses_forgets_the_attempts_too(task_store: TaskStore) -> None:
    key = TaskKey.from_ms("a", BASE_MS, "u")
    ended = Attempt(1, BASE_MS, BASE_MS + 1, AttemptOutcome.FAILED, error="x")
    task_store.record_statuses(0, [TaskStatus(key, TaskState.FAILED, 1, "x", attempt_log=(ended,))])

    task_store.delete_statuses(0, [key])

    assert task_store.attempts(0, key) == []


def test_attempts_expire_with_the_status_retention(short_retention_task_store: TaskStore) -> None:
    store = short_retention_task_store
    key = TaskKey.from_ms("a", BASE_MS, "u")
    store.record_statuses(0, [TaskStatus(key, TaskState.RUNNING, 1, attempt_log=(started(1, 1),))])
    assert len(store.attempts(0, key)) == 1

    deadline = time.monotonic() + 20
    while store.attempts(0, key) and time.monotonic() < deadline:
        time.sleep(0.1)

    assert store.attempts(0, key) == []


# -- admin and metadata --------------------------------------------------------------------


def test_list_tasks_filters_by_ordering_id_and_state(task_store: TaskStore) -> None:
    pending = task("a", BASE_MS, "1", n=1)
    running = task("a", BASE_MS + BUCKET_MS, "2", n=2)
    failed = task("b", BASE_MS + 2 * BUCKET_MS, "3", n=3)
    succeeded = task("b", BASE_MS + 3 * BUCKET_MS, "4", n=4)
    task_store.write_tasks(5, [pending, running, failed, succeeded])
    task_store.record_statuses(
        5,
        [
            TaskStatus(running.key, TaskState.RUNNING, 1),
            TaskStatus(failed.key, TaskState.FAILED, 3, "boom", data=failed.data),
            TaskStatus(succeeded.key, TaskState.SUCCEEDED, 1),
        ],
    )

    everything = task_store.list_tasks(5)
    assert [(v.task, v.state) for v in everything] == [
        (pending, TaskState.PENDING),
        (running, TaskState.RUNNING),
        (failed, TaskState.FAILED),
        (task("b", succeeded.scheduled_ms, "4"), TaskState.SUCCEEDED),
    ]
    assert all(view.partition == 5 for view in everything)
    assert [v.task for v in task_store.list_tasks(5, ordering_id="a")] == [pending, running]
    assert [v.task for v in task_store.list_tasks(5, states=[TaskState.FAILED])] == [failed]
    assert [
        v.task.key for v in task_store.list_tasks(5, ordering_id="a", states=[TaskState.PENDING])
    ] == [pending.key]
    assert [v.task.key for v in task_store.list_tasks(5, limit=2)] == [pending.key, running.key]
    assert task_store.list_tasks(5, ordering_id="nobody") == []


def test_list_tasks_pages_after_a_cursor_within_a_time_range(task_store: TaskStore) -> None:
    """A listing read a page at a time (bulk retry, drop and rerun) sees every task once: rows
    and final statuses without rows alike, across buckets, in schedule order."""
    tasks = [
        task(f"o{n % 3}", BASE_MS + n * BUCKET_MS // 3 + (n % 2), f"u{n}", n=n) for n in range(12)
    ]
    task_store.write_tasks(7, tasks)
    finished = tasks[1::4]
    task_store.record_statuses(
        7, [TaskStatus(t.key, TaskState.SUCCEEDED, 1, data=t.data) for t in finished]
    )

    pages, after = [], None
    while True:
        page = task_store.list_tasks(7, limit=5, after=after)
        pages.append([view.task.key for view in page])
        if len(page) < 5:
            break
        after = page[-1].task.key.cursor
    assert [len(page) for page in pages] == [5, 5, 2]
    assert [key for page in pages for key in page] == [t.key for t in tasks]
    # Small pages filtered by state, each drawing on schedule rows and final statuses alike.
    both = [TaskState.PENDING, TaskState.SUCCEEDED]
    shown: list[TaskKey] = []
    after = None
    while page := task_store.list_tasks(7, limit=2, after=after, states=both):
        shown += [view.task.key for view in page]
        after = page[-1].task.key.cursor
    assert shown == [t.key for t in tasks]

    from_ms, until_ms = tasks[2].scheduled_ms, tasks[9].scheduled_ms
    in_range = task_store.list_tasks(7, from_ms=from_ms, until_ms=until_ms)
    assert [v.task.key for v in in_range] == [t.key for t in tasks[2:9]]
    second = task_store.list_tasks(
        7, from_ms=from_ms, until_ms=until_ms, after=tasks[4].key.cursor, limit=2
    )
    assert [v.task.key for v in second] == [tasks[5].key, tasks[6].key]
    done = task_store.list_tasks(7, states=[TaskState.SUCCEEDED], after=finished[0].key.cursor)
    assert [v.task.key for v in done] == [t.key for t in finished[1:]]
    assert task_store.list_tasks(7, ordering_id="o1", from_ms=tasks[8].scheduled_ms) == [
        view for view in task_store.list_tasks(7) if view.task.key in {tasks[10].key}
    ]


def test_a_page_resumes_inside_the_cursors_millisecond_and_bucket(task_store: TaskStore) -> None:
    """Many tasks of one millisecond (rows and final statuses without rows), paged by three: the
    cursor resumes right after the last row shown, inside its bucket, and no row is shown twice
    or skipped."""
    same_ms = [task(f"o{n % 4}", BASE_MS + 5, f"u{n:02}", n=n) for n in range(10)]
    later = [task("o9", BASE_MS + 6 + n, f"v{n}", n=n) for n in range(3)]
    everything = same_ms + later
    task_store.write_tasks(5, everything)
    gone = same_ms[2::3]  # final statuses whose rows are removed: the status side of the join
    task_store.record_statuses(
        5, [TaskStatus(t.key, TaskState.FAILED, 1, data=t.data) for t in gone]
    )
    task_store.delete_tasks(5, [t.key for t in gone])
    shown: list[TaskKey] = []
    after = None
    while page := task_store.list_tasks(5, limit=3, after=after):
        assert len(page) <= 3
        shown += [view.task.key for view in page]
        after = page[-1].task.key.cursor
    assert shown == sorted(t.key for t in everything)
    resumed = task_store.list_tasks(5, limit=2, after=sorted(t.key for t in same_ms)[4].cursor)
    assert [v.task.key for v in resumed] == sorted(t.key for t in same_ms)[5:7]


def _paged(store: TaskStore, partition: int, limit: int, **filters: object) -> list[list[TaskKey]]:
    """Every page of a listing walked with the cursor of each page's last task, until a page
    shorter than `limit` (the last one, possibly empty)."""
    pages: list[list[TaskKey]] = []
    after = None
    while True:
        page = store.list_tasks(partition, limit=limit, after=after, **filters)  # type: ignore[arg-type]
        pages.append([view.task.key for view in page])
        if len(page) < limit:
            return pages
        after = page[-1].task.key.cursor


def test_pages_of_any_size_show_every_matching_task_once_across_buckets(
    task_store: TaskStore,
) -> None:
    """Three buckets, each with a crowd of one millisecond larger than a page, pending rows,
    running ones (row and status) and failed and succeeded ones without rows (status only),
    interleaved: walked with the cursor a page at a time, unfiltered, by ordering id, by state
    and by both, every page holds what the whole listing holds there, in schedule order, and
    the walk ends with a short (or empty) last page."""
    partition = 3
    rows: list[_Task] = []
    for bucket in range(3):
        start = BASE_MS + 2 * bucket * BUCKET_MS  # buckets 0, 2 and 4: gaps between them
        rows += [task(f"o{n % 4}", start + 7, f"c{n:02}", n=n) for n in range(23)]
        rows += [task(f"o{n % 3}", start + 1_000 * (n + 1), f"s{n}", n=n) for n in range(9)]
    task_store.write_tasks(partition, rows)
    states = {}
    for n, row in enumerate(rows):
        state = [None, TaskState.RUNNING, TaskState.FAILED, None, TaskState.SUCCEEDED][n % 5]
        if state is not None:
            states[row.key] = state
    task_store.record_statuses(
        partition, [TaskStatus(key, state, 1, data={}) for key, state in states.items()]
    )
    finished = [key for key, state in states.items() if state.is_final]
    task_store.delete_tasks(partition, finished)  # succeeded and failed: status rows only
    expected = sorted((row.key, states.get(row.key, TaskState.PENDING)) for row in rows)

    def keys(ordering_id: str | None = None, wanted: set[TaskState] | None = None) -> list:
        return [
            key
            for key, state in expected
            if (ordering_id is None or key.ordering_id == ordering_id)
            and (wanted is None or state in wanted)
        ]

    assert [v.task.key for v in task_store.list_tasks(partition, limit=1000)] == keys()
    for limit in (1, 4, 7, 30, 96):
        pages = _paged(task_store, partition, limit)
        assert [key for page in pages for key in page] == keys(), limit
        assert all(len(page) == limit for page in pages[:-1]) and len(pages[-1]) < limit
    for ordering_id in ("o0", "o3"):
        pages = _paged(task_store, partition, 5, ordering_id=ordering_id)
        assert [key for page in pages for key in page] == keys(ordering_id)
    for wanted in ({TaskState.FAILED}, {TaskState.PENDING, TaskState.RUNNING}):
        pages = _paged(task_store, partition, 3, states=wanted)
        assert [key for page in pages for key in page] == keys(wanted=wanted)
    both = _paged(task_store, partition, 2, ordering_id="o1", states={TaskState.SUCCEEDED})
    assert [key for page in both for key in page] == keys("o1", {TaskState.SUCCEEDED})

    # A cursor on a bucket's last task resumes at the next bucket's first, over the gap.
    last_of_first = max(key for key, _ in expected if key.scheduled_ms < BASE_MS + BUCKET_MS)
    (next_view,) = task_store.list_tasks(partition, limit=1, after=last_of_first.cursor)
    assert next_view.task.key == min(
        key for key, _ in expected if key.scheduled_ms >= BASE_MS + BUCKET_MS
    )
    # Empty pages: after the last task, of an ordering id or a state with none, of an empty
    # partition.
    assert task_store.list_tasks(partition, after=expected[-1][0].cursor) == []
    assert task_store.list_tasks(partition, ordering_id="nobody") == []
    assert task_store.list_tasks(partition, states=[TaskState.CANCELLED]) == []
    assert task_store.list_tasks(partition, states=[]) == []
    assert task_store.list_tasks(partition + 1) == []


def test_claim_meta_keeps_the_first_value(task_store: TaskStore) -> None:
    assert task_store.read_meta("partition_count") is None
    assert task_store.claim_meta("partition_count", "16") == "16"
    assert task_store.read_meta("partition_count") == "16"
    assert task_store.claim_meta("partition_count", "32") == "16"
    assert task_store.claim_meta("other", "x") == "x"


# -- malformed records ---------------------------------------------------------------------


def malformed(partition: int, offset: int, value: bytes | None = b"not json") -> MalformedRecord:
    return MalformedRecord.of(
        partition,
        offset,
        reason=f"bad record {offset}",
        key=b"k%d" % offset,
        value=value,
        timestamp_ms=BASE_MS + offset,
        seen_ms=BASE_MS + DAY_MS,
    )


def test_malformed_records_are_kept_and_listed_in_partition_and_offset_order(
    task_store: TaskStore,
) -> None:
    # Offsets on both sides of a Cassandra block boundary, written out of order.
    records = [malformed(2, MALFORMED_BLOCK + 1), malformed(0, 7), malformed(2, 3)]
    records.append(malformed(2, MALFORMED_BLOCK - 1, value=None))
    task_store.set_aside(records)

    listed = task_store.malformed_records()
    assert listed == sorted(records, key=lambda r: (r.partition, r.offset))
    assert listed[0] == MalformedRecord(
        0, 7, "bad record 7", b"k7", b"not json", 8, BASE_MS + 7, BASE_MS + DAY_MS
    )
    assert [r.offset for r in task_store.malformed_records(2)] == [
        3,
        MALFORMED_BLOCK - 1,
        MALFORMED_BLOCK + 1,
    ]
    assert [r.offset for r in task_store.malformed_records(2, from_offset=4)] == [
        MALFORMED_BLOCK - 1,
        MALFORMED_BLOCK + 1,
    ]
    assert [r.offset for r in task_store.malformed_records(2, from_offset=MALFORMED_BLOCK)] == [
        MALFORMED_BLOCK + 1
    ]
    assert [(r.partition, r.offset) for r in task_store.malformed_records(limit=2)] == [
        (0, 7),
        (2, 3),
    ]
    assert task_store.malformed_records(1) == []
    assert task_store.list_tasks(2) == []  # evidence, not tasks


def test_malformed_counts_are_per_partition_and_stop_at_the_limit(task_store: TaskStore) -> None:
    assert task_store.malformed_counts(limit=10) == {}
    offsets = {0: [1, 2], 2: [3, MALFORMED_BLOCK + 4, 2 * MALFORMED_BLOCK + 5]}
    task_store.set_aside([malformed(p, o) for p, kept in offsets.items() for o in kept])

    assert task_store.malformed_counts(limit=10) == {0: 2, 2: 3}
    capped = task_store.malformed_counts(limit=3)
    assert sum(capped.values()) == 3
    assert set(capped) <= {0, 2}
    assert all(capped[p] <= len(offsets[p]) for p in capped)
    task_store.drop_malformed(2, [3])
    assert task_store.malformed_counts(limit=10) == {0: 2, 2: 2}


def test_a_malformed_record_set_aside_again_is_kept_once(task_store: TaskStore) -> None:
    task_store.set_aside([malformed(1, 5)])
    again = MalformedRecord.of(
        1, 5, reason="read again", key=None, value=b"x", timestamp_ms=1, seen_ms=2
    )
    task_store.set_aside([again])

    assert task_store.malformed_records(1) == [again]


def test_a_large_malformed_record_is_kept_cut_with_its_size(task_store: TaskStore) -> None:
    huge = b"\xff" * (MALFORMED_KEPT_BYTES * 3)
    task_store.set_aside([malformed(0, 1, value=huge)])

    (kept,) = task_store.malformed_records(0)
    assert kept.value == huge[:MALFORMED_KEPT_BYTES]
    assert kept.value_bytes == len(huge)


def test_dropped_malformed_records_are_forgotten(task_store: TaskStore) -> None:
    task_store.set_aside([malformed(3, offset) for offset in (1, 2, MALFORMED_BLOCK + 3)])

    task_store.drop_malformed(3, [1, MALFORMED_BLOCK + 3, 99])

    assert [r.offset for r in task_store.malformed_records(3)] == [2]


def test_malformed_records_expire_with_the_status_retention(
    short_retention_task_store: TaskStore,
) -> None:
    store = short_retention_task_store
    store.set_aside([malformed(0, 1)])
    assert len(store.malformed_records()) == 1

    deadline = time.monotonic() + 20
    while store.malformed_records() and time.monotonic() < deadline:
        time.sleep(0.1)

    assert store.malformed_records() == []
