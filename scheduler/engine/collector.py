"""The garbage collector's pace in a worker process.

A worker keeps many small long-lived objects (every task it holds: its key, its `Task`, its
`ScheduledTask`; the partitions' actor trees; imported modules) and allocates a few short-lived
ones per task. With CPython's default first-generation threshold (700 allocations) the collector
runs every few tasks, and every tenth run also walks the second generation: in an execute run a
sixth of the worker's CPU samples were allocations that triggered a collection. The engine makes
no reference cycles per task, so collecting seventy times less often costs memory only for the
rare cycles, and the objects of start-up (modules, settings, actors) are moved out of the
collector's sight (`gc.freeze`), so a full collection does not walk them again and again.

Only the worker's entry point calls this: a library embedding the engine keeps its own pace.
"""

from __future__ import annotations

import gc

FIRST_GENERATION_THRESHOLD = 50_000
"""Allocations (net of deallocations) between two collections of the youngest generation."""


def pace_for_a_worker(threshold: int = FIRST_GENERATION_THRESHOLD) -> None:
    """Freeze what start-up made, and collect the youngest generation every `threshold`
    allocations instead of every 700 (the older generations keep their ratios)."""
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(threshold, second, third)
