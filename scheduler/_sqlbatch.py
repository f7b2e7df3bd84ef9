"""Statements over many rows for the embedded SQLite log and store.

Both write in batches, and both do it with one statement per chunk of rows (a multi-row VALUES,
or an OR of primary keys, which SQLite answers with one index search per term) rather than with
`executemany`. `executemany` gives up the GIL and takes it back around every row; in a worker,
where dozens of actor threads want the GIL, taking it back is a wait. Measured with three busy
Python threads beside the writer: 300-900 us a row through `executemany`, ~140 us through one
statement (and 4-15 us a row either way with nobody else running).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import chain
from typing import Any

CHUNK_ROWS = 256
"""Most rows per statement: 12 columns x 256 stays far under SQLite's 32,766 parameters."""

_SIZES = tuple(CHUNK_ROWS >> shift for shift in range(CHUNK_ROWS.bit_length()))
"""Statement sizes used: 256, 128, ..., 1. A batch of n rows is cut into chunks of these sizes
(n's binary digits), so a connection prepares at most nine statements of each kind; a prepared
statement over 256 rows is large, and one per possible length kept a worker's cache at
hundreds of megabytes."""


def chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    """`items` cut into consecutive chunks of the sizes in `_SIZES`, largest first."""
    chunks = []
    start = 0
    for size in _SIZES:
        while len(items) - start >= size:
            chunks.append(items[start : start + size])
            start += size
    return chunks


Statement = tuple[str, list[Any]]
"""SQL and its parameters, for one `execute`."""


@functools.lru_cache(maxsize=128)
def _values_sql(head: str, width: int, count: int, tail: str) -> str:
    row = "(" + ",".join("?" * width) + ")"
    return f"{head} {','.join([row] * count)}{tail}"


@functools.lru_cache(maxsize=128)
def _or_sql(head: str, match: str, count: int) -> str:
    return f"{head} " + " OR ".join([f"({match})"] * count)


def many_rows(head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> list[Statement]:
    """`head VALUES`-style statements inserting `rows`: `head` ends before the VALUES list
    (`INSERT INTO t VALUES`), `tail` follows it (an ON CONFLICT clause)."""
    # `chain` flattens in C: half the time of a nested comprehension, per value of every row.
    flat = chain.from_iterable
    return [
        (_values_sql(head, len(chunk[0]), len(chunk), tail), list(flat(chunk)))
        for chunk in chunks(rows)
    ]


def many_keys(head: str, match: str, keys: Sequence[Sequence[Any]]) -> list[Statement]:
    """`head` (`DELETE FROM t WHERE`) for every key, `match` being one key's condition with
    one `?` per key column (`a = ? AND b = ?`)."""
    flat = chain.from_iterable
    return [(_or_sql(head, match, len(chunk)), list(flat(chunk))) for chunk in chunks(keys)]
