"""A steady load of tasks, each ordering id's in key order, on a background thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Protocol

from scheduler.engine.clock import now_ms
from scheduler.fleet.history import KeyTuple
from scheduler.model import Task, from_epoch_ms

# -- load -------------------------------------------------------------------------------------


class _Scheduling(Protocol):
    def schedule_task(self, task: Task) -> Future[int]: ...


TaskData = Callable[[int, str], Mapping[str, Any]]
"""`data(sequence, ordering_id)`: the data of the n-th task (0-based, over all ordering ids)."""


class LoadGenerator:
    """A steady load of tasks on a background thread.

    Tasks go round-robin over `ordering_ids` ids at `rate_per_s` for `duration_s`, each due
    `lead_ms` after it is sent. Within an ordering id, due times strictly increase and the
    uniqueness keys are sequence numbers, so every id's tasks are enqueued in key order.
    Only tasks whose futures resolved (the log acknowledged them) count as accepted.
    """

    def __init__(
        self,
        client: _Scheduling,
        *,
        ordering_ids: int,
        rate_per_s: float,
        duration_s: float,
        lead_ms: int,
        data: TaskData | None = None,
        prefix: str = "load",
    ) -> None:
        if ordering_ids < 1 or rate_per_s <= 0 or duration_s < 0:
            raise ValueError("ordering_ids >= 1, rate_per_s > 0 and duration_s >= 0 please")
        self.client = client
        self.ids = [f"{prefix}-{n:03d}" for n in range(ordering_ids)]
        self.rate_per_s = rate_per_s
        self.duration_s = duration_s
        self.lead_ms = lead_ms
        self.data = data or (lambda sequence, ordering_id: {})
        self._futures: list[tuple[KeyTuple, Future[int]]] = []
        self._last_ms: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-load", daemon=True)
        self.sent = 0
        """Tasks handed to the client so far."""
        self.failed: list[tuple[KeyTuple, BaseException]] = []
        """Tasks whose futures failed (filled in by `join`)."""
        self.started_ms: int | None = None
        self.finished_ms: int | None = None

    def start(self) -> LoadGenerator:
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the load early."""
        self._stop.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float = 120.0) -> list[KeyTuple]:
        """Wait for the load to end and its futures to settle; the accepted keys."""
        self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        accepted: list[KeyTuple] = []
        self.failed = []
        for key, future in list(self._futures):
            try:
                future.result(max(0.0, deadline - time.monotonic()))
            except Exception as error:
                self.failed.append((key, error))
            else:
                accepted.append(key)
        return accepted

    def _run(self) -> None:
        self.started_ms = now_ms()
        start = time.monotonic()
        sequence = 0
        while not self._stop.is_set():
            elapsed = time.monotonic() - start
            if elapsed >= self.duration_s:
                break
            due = min(int(elapsed * self.rate_per_s) + 1, int(self.duration_s * self.rate_per_s))
            while sequence < due and not self._stop.is_set():
                self._send(sequence)
                sequence += 1
            time.sleep(0.005)
        self.finished_ms = now_ms()

    def _send(self, sequence: int) -> None:
        ordering_id = self.ids[sequence % len(self.ids)]
        scheduled_ms = max(now_ms() + self.lead_ms, self._last_ms.get(ordering_id, 0) + 1)
        self._last_ms[ordering_id] = scheduled_ms
        uniqueness_key = f"{sequence:09d}"
        task = Task(
            ordering_id,
            from_epoch_ms(scheduled_ms),
            uniqueness_key,
            dict(self.data(sequence, ordering_id)),
        )
        key = (ordering_id, task.key.scheduled_ms, uniqueness_key)
        assert key[1] == scheduled_ms, "a due time must survive the round trip to the ms"
        try:
            future = self.client.schedule_task(task)
        except Exception as error:
            future = Future()
            future.set_exception(error)
        self._futures.append((key, future))
        self.sent += 1
