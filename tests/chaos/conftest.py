"""The short chaos round: scenarios on the replicated cluster (`scheduler services up
--cluster`), which scripts/test.sh brings up for them and takes down after.

Tests marked `chaos` run only when the run asks for them (`-m chaos`): the cluster is five more
JVMs, which the whole suite's run must not start as a side effect.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "chaos" in (config.getoption("markexpr") or ""):
        return
    chosen = [item for item in items if item.get_closest_marker("chaos") is None]
    if len(chosen) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in chosen])
        items[:] = chosen
