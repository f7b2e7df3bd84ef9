"""A store wrapper that fails chosen calls, to kill partition actors on purpose."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from scheduler.errors import BackendUnavailableError
from scheduler.stores.abc import TaskStore


class InjectedFailure(RuntimeError):
    """Raised by FlakyStore where a test asked for a failure."""


class FlakyStore:
    """Delegates to a real store; `fail_next(method, partition, times)` makes calls raise."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._planned: dict[tuple[str, int | None], int] = {}
        self.injected = 0
        self.should_fail: Callable[[str, int], bool] = lambda method, partition: False
        self.unavailable = False
        """Fail as a store that is down does (`BackendUnavailableError`), not as a bug."""

    def fail_next(self, method: str, partition: int | None = None, times: int = 1) -> None:
        with self._lock:
            self._planned[(method, partition)] = times

    def _failure(self, method: str, partition: int) -> Exception:
        said = f"injected failure of {method} on partition {partition}"
        return BackendUnavailableError(said) if self.unavailable else InjectedFailure(said)

    def _check(self, method: str, partition: int) -> None:
        with self._lock:
            for target in ((method, partition), (method, None)):
                if self._planned.get(target, 0) > 0:
                    self._planned[target] -= 1
                    self.injected += 1
                    raise self._failure(method, partition)
        if self.should_fail(method, partition):
            with self._lock:
                self.injected += 1
            raise self._failure(method, partition)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if name == "set_aside":  # records of any partitions: fails if one of them is to fail

            def set_aside(records: Any) -> Any:
                for partition in sorted({record.partition for record in records}):
                    self._check(name, partition)
                return attribute(records)

            return set_aside
        if name not in {
            "write_tasks",
            "load_tasks",
            "record_statuses",
            "fetch_statuses",
            "delete_tasks",
        }:
            return attribute

        def call(partition: int, *args: Any, **kwargs: Any) -> Any:
            self._check(name, partition)
            return attribute(partition, *args, **kwargs)

        return call


def flaky_wrapper() -> tuple[list[FlakyStore], Callable[[TaskStore], FlakyStore]]:
    """A `wrap_store` for `embedded_engine`, and the list that holds the FlakyStore it made once
    the engine has started."""
    made: list[FlakyStore] = []

    def wrap(store: TaskStore) -> FlakyStore:
        made.append(FlakyStore(store))
        return made[0]

    return made, wrap
