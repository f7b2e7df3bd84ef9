"""`scheduler example run`'s own settings, without running Spark (the pipeline itself is in
tests/executors/test_clicks_example*.py)."""

from __future__ import annotations

import logging
import types
from pathlib import Path

import pytest

from scheduler.settings import Settings


def test_the_example_writes_a_task_line_only_for_failures_unless_told_otherwise(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own lines say what fired and how far the runs got; 84 lines of finished tasks
    would bury them. A task_log_level the user set still wins."""
    seen: list[Settings] = []
    pipeline = types.SimpleNamespace(main=lambda settings, fleet: seen.append(settings))
    monkeypatch.setattr("scheduler.cli.example._example_module", lambda: pipeline)
    monkeypatch.setenv("SCHEDULER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SCHEDULER_TASK_LOG_LEVEL", raising=False)

    assert run("example", "run").exit_code == 0
    assert seen[-1].task_log_level == "WARNING"
    assert logging.getLogger("scheduler.tasks").level == logging.WARNING

    monkeypatch.setenv("SCHEDULER_TASK_LOG_LEVEL", "info")
    assert run("example", "run").exit_code == 0
    assert seen[-1].task_log_level == "INFO"
    assert logging.getLogger("scheduler.tasks").level == logging.INFO
