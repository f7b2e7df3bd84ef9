"""The C path of `schedule_task` (`scheduler/_speedups.c`), when it is built and not turned off.

`pip install` compiles it where a C compiler is found; without one the build goes on without it
and every task takes the Python path, which stays the reference: the C path answers only the
common task and hands anything else to the Python code (docs/architecture.md, "The C path of
schedule_task"). `SCHEDULER_SPEEDUPS=0` turns it off for clients and producers made afterwards,
to rule it out when something looks wrong.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

try:
    from scheduler import _speedups as native
except ImportError:  # not compiled here: the Python path serves
    native = None  # type: ignore[assignment]

__all__ = ["ENV", "enabled", "native", "turned_off"]

ENV = "SCHEDULER_SPEEDUPS"


def enabled() -> bool:
    """Whether objects made now take the C path: it is built and `SCHEDULER_SPEEDUPS` is not 0."""
    return native is not None and os.environ.get(ENV, "1").strip() != "0"


@contextmanager
def turned_off() -> Iterator[None]:
    """Clients and producers made inside take the Python path: the benchmark's side by side."""
    before = os.environ.get(ENV)
    os.environ[ENV] = "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = before
