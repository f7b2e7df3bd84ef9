"""GroupCommit: concurrent writers share transactions without sharing failures."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from scheduler.stores._group_commit import GroupCommit


class Database:
    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.connection.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, writer INTEGER)")
        self.lock = threading.Lock()
        self.transactions = 0
        self.fail_commit = False

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self.transactions += 1
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                yield self.connection
                if self.fail_commit:
                    raise sqlite3.OperationalError("disk I/O error")
            except BaseException:
                self.connection.execute("ROLLBACK")
                raise
            self.connection.execute("COMMIT")

    def rows(self) -> list[tuple[int, int]]:
        return self.connection.execute("SELECT k, writer FROM t ORDER BY k").fetchall()


@pytest.fixture
def db(tmp_path) -> Database:
    return Database(str(tmp_path / "g.db"))


def wrap(error: sqlite3.Error) -> Exception:
    return RuntimeError(f"store: {error}")


INSERT = "INSERT INTO t VALUES (?, ?)"


def test_every_concurrent_writer_is_committed_in_fewer_transactions(db: Database) -> None:
    group = GroupCommit(db.transaction, wrap)
    writers, per_writer = 16, 50
    start = threading.Barrier(writers)

    def write(w: int) -> None:
        start.wait()
        for n in range(per_writer):
            group.run([(INSERT, (w * 1000 + n, w))])

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(db.rows()) == writers * per_writer
    assert db.transactions < writers * per_writer  # some writers shared a transaction


def test_a_failing_writer_gets_its_error_and_the_others_commit(db: Database) -> None:
    group = GroupCommit(db.transaction, wrap)
    group.run([(INSERT, (1, 0))])
    # Hold the transaction so that both writers below queue into one group.
    db.lock.acquire()
    errors: dict[str, BaseException | None] = {}

    def write(name: str, rows: list[tuple[int, int]]) -> None:
        try:
            group.run([(INSERT, row) for row in rows])
            errors[name] = None
        except BaseException as error:
            errors[name] = error

    bad = threading.Thread(target=write, args=("bad", [(2, 1), (1, 1)]))  # 1 exists: conflict
    good = threading.Thread(target=write, args=("good", [(3, 2)]))
    bad.start()
    good.start()
    threading.Event().wait(0.1)
    db.lock.release()
    bad.join(10)
    good.join(10)

    assert isinstance(errors["bad"], RuntimeError) and "UNIQUE" in str(errors["bad"])
    assert errors["good"] is None
    assert db.rows() == [(1, 0), (3, 2)]  # the failing writer's first row was rolled back too


def test_a_failed_commit_fails_every_writer_in_the_group(db: Database) -> None:
    group = GroupCommit(db.transaction, wrap)
    db.fail_commit = True
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        group.run([(INSERT, (1, 0))])
    db.fail_commit = False
    group.run([(INSERT, (2, 0))])  # the lead was handed back: later writers still commit
    assert db.rows() == [(2, 0)]


def test_the_runs_of_a_together_block_are_committed_in_one_transaction_at_its_end(
    db: Database,
) -> None:
    group = GroupCommit(db.transaction, wrap)
    with group.together():
        group.run([(INSERT, (1, 0))])
        group.run([(INSERT, (2, 0))])
        assert db.rows() == [] and db.transactions == 0  # nothing written before the end
    assert db.rows() == [(1, 0), (2, 0)]
    assert db.transactions == 1


def test_a_together_block_that_raises_writes_what_ran_before_the_error(db: Database) -> None:
    group = GroupCommit(db.transaction, wrap)
    with pytest.raises(ValueError, match="the second call failed"), group.together():
        group.run([(INSERT, (1, 0))])
        raise ValueError("the second call failed")
    assert db.rows() == [(1, 0)]
    group.run([(INSERT, (2, 0))])  # outside the block, a run is written at once again
    assert db.rows() == [(1, 0), (2, 0)]
