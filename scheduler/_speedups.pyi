"""Types of the C path of `schedule_task` (scheduler/_speedups.c); see `scheduler.speedups`."""

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any

from scheduler.logs.abc import RecordKey

def encode_schedule(
    key: Any, data: Mapping[str, Any], max_bytes: int, dumps: Any, dumps_option: int
) -> bytes | None: ...

class OutcomeLock:
    def __enter__(self) -> bool: ...
    def __exit__(self, *exc: object) -> bool: ...

OUTCOME_LOCK: OutcomeLock

def install_delivery(cls: type[Future[int]], set_result: Callable[..., None]) -> None: ...

class RecordSender:
    def __init__(
        self,
        *,
        producer: Any,
        future_type: type[Future[int]],
        produce: Callable[..., None],
        topic: str,
        sends: Iterator[int],
        poll: Callable[[float], object],
        slow_send: Callable[[RecordKey, bytes], Future[int]],
        poll_every: int,
    ) -> None: ...
    def __call__(self, key: RecordKey, value: bytes) -> Future[int]: ...

class TaskScheduler:
    validate: Callable[[Any], None] | None
    grace_ns: int
    max_data_bytes: int
    def __init__(
        self,
        *,
        send: Callable[[RecordKey, bytes], Future[int]],
        slow: Callable[[Any], Future[int]],
        failed: Callable[[BaseException], Future[int]],
        dumps: Any,
        dumps_option: int,
        validate: Callable[[Any], None] | None,
        grace_ns: int,
        max_data_bytes: int,
    ) -> None: ...
    def __call__(self, task: Any) -> Future[int]: ...
