"""The embedded log's file: its tables and the statements that read them.

Connections to it are opened by `scheduler._sqlite_open.open_wal`, as the store's are.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from scheduler._sqlite_open import rollback

SCHEMA = """
CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, partitions INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS partitions (
    topic TEXT NOT NULL, partition INTEGER NOT NULL,
    start_offset INTEGER NOT NULL, end_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    key BLOB, value BLOB, timestamp_ms INTEGER NOT NULL,
    PRIMARY KEY (topic, partition, offset)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS offsets (
    topic TEXT NOT NULL, grp TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    PRIMARY KEY (topic, grp, partition)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS offset_metadata (
    topic TEXT NOT NULL, grp TEXT NOT NULL, partition INTEGER NOT NULL, metadata TEXT NOT NULL,
    PRIMARY KEY (topic, grp, partition)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS members (
    topic TEXT NOT NULL, grp TEXT NOT NULL, member TEXT NOT NULL, client_id TEXT NOT NULL,
    pid INTEGER NOT NULL, partitions TEXT NOT NULL, heartbeat_ms INTEGER NOT NULL,
    PRIMARY KEY (topic, grp, member)) WITHOUT ROWID;
"""

PARTITIONS = "SELECT partition, start_offset, end_offset FROM partitions WHERE topic = ?"
RECORDS = (
    "SELECT offset, key, value, timestamp_ms FROM records"
    " WHERE topic = ? AND partition = ? AND offset >= ? ORDER BY offset LIMIT ?"
)


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, rolled back if the block raises (else the connection's
    next BEGIN fails: a transaction would still be open)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        rollback(db)
        raise
