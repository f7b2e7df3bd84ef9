"""The garbage collector's pace in a worker process.

The engine and the embedded backends make no reference cycles per task, so there the youngest
generation is collected seventy times less often than CPython's default (which, every few tasks,
was a sixth of an execute run's CPU). The Cassandra driver does: every request's ResponseFuture,
holding its statement and the statement's rows, is left in a reference cycle. At the slow pace
that garbage outlived the young collections and waited for a full one, which came every few
million allocations: draining a backlog of 100,000 tasks held 50 to 100 MB more. A worker whose
store is Cassandra therefore keeps CPython's pace. Either way, what start-up made is frozen out
of the collector's sight. Only the worker's entry point calls this.
"""

from __future__ import annotations

import gc

FIRST_GENERATION_THRESHOLD = 50_000
"""Allocations (net of deallocations) between two collections of the youngest generation, in a
worker whose backends make no reference cycles per request."""
CYCLIC_BACKEND_THRESHOLD = 700
"""The same, CPython's default, in a worker whose store leaves every request in a reference
cycle (Cassandra's driver)."""


def pace_for_a_worker(*, cyclic_requests: bool = False) -> None:
    """Freeze what start-up made, and collect the youngest generation every
    `FIRST_GENERATION_THRESHOLD` allocations instead of every 700, unless the backends'
    requests make reference cycles (`cyclic_requests`); the older generations keep their
    ratios."""
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    first = CYCLIC_BACKEND_THRESHOLD if cyclic_requests else FIRST_GENERATION_THRESHOLD
    gc.set_threshold(first, second, third)
