"""`scheduler group status` counts due work from the partition's committed reload mark: its
stragglers and the rows after it, never the rows behind it (on Cassandra, the tombstones of
completed tasks, which can be enough to make the node refuse the read)."""

from __future__ import annotations

import json
import time

from scheduler.config import load_settings
from scheduler.engine.reload_mark import ReloadMark
from scheduler.model import Task, TaskKey
from scheduler.runtime import build_log, open_store

PARTITION = 1


def task(offset_s: int, name: str) -> Task:
    now_ms = time.time_ns() // 1_000_000
    return Task.from_key(TaskKey.from_ms("acct", now_ms + offset_s * 1000, name), {})


def overdue(run) -> int:
    status = run("group", "status", "--json")
    assert status.exit_code == 0, status.output
    [row] = [row for row in json.loads(status.output) if row["partition"] == PARTITION]
    return row["overdue"]


def commit(metadata: str) -> None:
    settings = load_settings()
    log = build_log(settings)
    try:
        log.ensure_topic(4)
        log.commit(settings.group_id, {PARTITION: 0}, {PARTITION: metadata})
    finally:
        log.close()


def test_overdue_counts_the_marks_stragglers_and_the_rows_after_it(run, embedded):
    straggler = task(-3600, "retrying-for-an-hour")
    # Rows behind the mark that are not stragglers: on Cassandra these would be tombstones.
    behind = [task(-600 + n, f"behind-{n}") for n in range(5)]
    mark = ReloadMark(task(-60, "mark").key.cursor, (straggler.key,))
    due = [task(-30, "due-1"), task(-1, "due-2")]
    later = task(3600, "later")
    store = open_store(load_settings())
    try:
        store.write_tasks(PARTITION, [straggler, *behind, *due, later])
    finally:
        store.close()

    commit("")  # no mark: every row is read and counted
    assert overdue(run) == 1 + 5 + 2
    commit(mark.encode())
    assert overdue(run) == 1 + 2
