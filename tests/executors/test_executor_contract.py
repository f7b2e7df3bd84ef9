"""The Executor contract (scheduler/executors/abc.py), run against every built-in executor that
runs work: return on success, raise on failure, stop when cancelled, never start once cancelled.

Each adapter supplies task data for "succeeds", "fails" and "runs until cancelled"; the tests
only use the port.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.executors.abc import ExecutionContext, Executor
from tests.executors.conftest import context_for, make_task


@dataclass
class Adapter:
    executor: Executor
    ok: dict[str, Any]
    failing: dict[str, Any]
    endless: dict[str, Any]


def _sleep_in_spark(spark: Any, context: ExecutionContext) -> None:
    def nap(_: int) -> int:
        time.sleep(120)
        return 0

    spark.sparkContext.parallelize([0], 1).map(nap).collect()


def _fail(spark: Any, context: ExecutionContext) -> None:
    raise ValueError("the job's own failure")


def _command_adapter(tmp_path) -> Adapter:
    from scheduler.executors.command import CommandExecutor

    def argv(code: str) -> dict[str, Any]:
        return {"argv": [sys.executable, "-c", code], "stdout": str(tmp_path / "{{task_key}}.out")}

    return Adapter(
        CommandExecutor(log_dir=str(tmp_path)),
        ok=argv("print('ok')"),
        failing=argv("import sys; sys.exit('the command failed')"),
        endless=argv("import time; time.sleep(120)"),
    )


def _spark_adapter(request) -> Adapter:
    executor = request.getfixturevalue("spark_executor")
    executor.jobs.register("contract:ok", lambda spark, context: spark.range(5).count())
    executor.jobs.register("contract:fail", _fail)
    executor.jobs.register("contract:endless", _sleep_in_spark)
    return Adapter(
        executor,
        ok={"job": "contract:ok"},
        failing={"job": "contract:fail"},
        endless={"job": "contract:endless"},
    )


@pytest.fixture(params=["command", pytest.param("spark", marks=pytest.mark.spark)])
def adapter(request, tmp_path) -> Iterator[Adapter]:
    factories: dict[str, Callable[[], Adapter]] = {
        "command": lambda: _command_adapter(tmp_path),
        "spark": lambda: _spark_adapter(request),
    }
    yield factories[request.param]()


def test_a_task_that_succeeds_returns(adapter: Adapter) -> None:
    task = make_task(adapter.ok)
    assert adapter.executor(task, context_for(task)) is None


def test_a_task_that_fails_raises(adapter: Adapter) -> None:
    task = make_task(adapter.failing)
    with pytest.raises(Exception, match=r"failed|failure"):
        adapter.executor(task, context_for(task))


def test_a_cancelled_attempt_stops_promptly_and_raises(adapter: Adapter) -> None:
    task = make_task(adapter.endless)
    context = context_for(task)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            adapter.executor(task, context)
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)  # let it really start: cancelling a queued call is the next test
    context.cancel("cancelled by the contract test")
    thread.join(30)
    assert not thread.is_alive(), "the executor ignored the cancellation"
    assert outcome and outcome[0] is not None


def test_an_attempt_cancelled_before_it_starts_does_no_work(adapter: Adapter, tmp_path) -> None:
    task = make_task(adapter.endless)
    context = context_for(task)
    context.cancel("cancelled before start")
    started = time.monotonic()
    with pytest.raises(Exception, match="cancel"):
        adapter.executor(task, context)
    assert time.monotonic() - started < 10
