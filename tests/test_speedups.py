"""The C path of `schedule_task` (scheduler/_speedups.c) answers exactly as the Python path.

It takes the common task and hands every other to Python; these tests hold its records to the
Python encoder's, its futures to `concurrent.futures.Future`'s behaviour, and check that what it
hands back really goes back. The Kafka side runs in the contract suite and tests/logs (with the
Python path as a `kafka-python` log of its own).
"""

from __future__ import annotations

import gc
import itertools
import math
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, as_completed, wait
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import SchedulerClient, Task, TaskDataError, TaskInPastError, codec, speedups
from scheduler.logs.abc import LogProducer
from scheduler.logs.kafka_producer import _FastRecordDelivery, _RecordDelivery
from scheduler.model import LATEST_MS, TaskKey
from tests.engine.helpers import soon

native = speedups.native


def test_the_c_path_is_built_here() -> None:
    # `pip install` builds it wherever a C compiler is found, as on every machine CI runs on;
    # a build that silently failed would leave every other test here on the Python path.
    assert native is not None, "scheduler/_speedups.c was not compiled: see the pip log"
    assert speedups.enabled()


# ---- the record -----------------------------------------------------------------------------

MAX = 256 * 1024


def c_encode(key: TaskKey, data: Any, max_bytes: int = MAX) -> bytes | None:
    assert native is not None
    return native.encode_schedule(key, data, max_bytes, codec.DUMPS, codec.DUMPS_OPTIONS)


def python_encode(key: TaskKey, data: Any, max_bytes: int = MAX) -> bytes | Exception:
    try:
        return codec.encode_schedule_in_python(key, data, max_bytes)
    except Exception as error:
        return error


key_parts = st.text(min_size=1, max_size=20).filter(lambda s: s.strip() and "\x00" not in s)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(
    ordering_id=key_parts,
    uniqueness_key=key_parts,
    scheduled_ms=st.integers(min_value=-(2**62), max_value=LATEST_MS),
    data=st.dictionaries(st.text(max_size=5), json_values, max_size=4),
    max_bytes=st.sampled_from([10, 100, MAX]),
)
def test_a_record_the_c_path_writes_is_the_python_one_byte_for_byte(
    ordering_id: str, uniqueness_key: str, scheduled_ms: int, data: dict[str, Any], max_bytes: int
) -> None:
    key = TaskKey.from_ms(ordering_id, scheduled_ms, uniqueness_key)
    written = c_encode(key, data, max_bytes)
    if written is not None:  # else the Python path encodes it, or refuses it
        assert written == python_encode(key, data, max_bytes)


plain_text = st.text(
    st.characters(min_codepoint=0x20, blacklist_categories=["Cs"], blacklist_characters='"\\'),
    min_size=1,
    max_size=20,
).filter(str.strip)
plain_values = st.recursive(
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10).filter(lambda s: "null" not in s),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.text(max_size=5).filter(lambda s: "null" not in s), children, max_size=3
        )
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    ordering_id=plain_text,
    uniqueness_key=plain_text,
    scheduled_ms=st.integers(min_value=-(2**62), max_value=LATEST_MS),
    data=st.dictionaries(st.text(max_size=5).filter(lambda s: "null" not in s), plain_values),
)
def test_the_common_task_takes_the_c_path_and_writes_the_python_record(
    ordering_id: str, uniqueness_key: str, scheduled_ms: int, data: dict[str, Any]
) -> None:
    key = TaskKey.from_ms(ordering_id, scheduled_ms, uniqueness_key)
    written = c_encode(key, data)
    assert written is not None and written == python_encode(key, data)


@pytest.mark.parametrize(
    "ordering_id, data",
    [
        ("orders-42", {}),
        ("user:ñandú/🦤", {"n": 1, "s": "ok", "list": [1.5, True, "x"], "nested": {"a": "b"}}),
        ("a b c", {"text": "x" * 1000}),
    ],
)
def test_the_common_task_takes_the_c_path(ordering_id: str, data: dict[str, Any]) -> None:
    key = TaskKey.from_ms(ordering_id, 1_767_225_600_123, "run-1")
    written = c_encode(key, data)
    assert written is not None and written == python_encode(key, data)


@pytest.mark.parametrize(
    "ordering_id, data, why",
    [
        ('say "hi"', {}, "a quote to escape"),
        ("tab\there", {}, "a control character to escape"),
        ("back\\slash", {}, "a backslash to escape"),
        ("a", {"x": None}, "a null: maybe a NaN orjson wrote, which Python refuses"),
        ("a", {"x": math.nan}, "a NaN"),
        ("a", {1: "non-str key"}, "a key orjson refuses"),
        ("a", {"big": "x" * MAX}, "a record over max_data_bytes"),
        ("lone \udc80 surrogate", {}, "no UTF-8 for it"),
    ],
)
def test_a_task_the_c_path_does_not_take_goes_to_python(
    ordering_id: str, data: dict[Any, Any], why: str
) -> None:
    assert c_encode(TaskKey.from_ms(ordering_id, 5, "u"), data) is None, why


def test_a_key_that_is_not_a_task_key_goes_to_python() -> None:
    class Key:
        ordering_id = "a"
        uniqueness_key = "u"
        scheduled_ms = 5.0  # not an int

    assert c_encode(Key(), {}) is None  # type: ignore[arg-type]
    assert c_encode(object(), {}) is None  # type: ignore[arg-type]


# ---- the record's future, made by the C send ------------------------------------------------


class FakeProducer:
    """What the C send needs of a KafkaLogProducer, with `produce` kept for the test to answer."""

    def __init__(self) -> None:
        self._open = True
        self.queued: list[tuple[str, bytes, Any, int, Any]] = []
        self.refuse: type[Exception] | None = None
        self.polls = 0
        self.slow_sends: list[tuple[Any, bytes]] = []
        self.failures: list[tuple[Any, Any]] = []

    def produce(self, topic: str, value: bytes, key: Any, partition: int, future: Any) -> None:
        if self.refuse is not None:
            raise self.refuse("refused")
        self.queued.append((topic, value, key, partition, future))

    def poll(self, timeout: float) -> None:
        self.polls += 1

    def slow_send(self, key: Any, value: bytes) -> Future[int]:
        self.slow_sends.append((key, value))
        future: Future[int] = Future()
        future.set_result(-1)
        return future

    def serve_until_done(self, future: Future[int], timeout: float | None) -> None:
        pass  # the real producer polls librdkafka here; the test answers by hand

    def _hand_over(self, error: Any, message: Any, on_delivery: Any) -> bool:
        return False  # no client renewal here: a failed record fails

    def failure(self, error: Any, message: Any) -> Exception:
        self.failures.append((error, message))
        return RuntimeError(f"not delivered: {error}")


class Message:
    def __init__(self, partition: int | None) -> None:
        self._partition = partition

    def partition(self) -> int | None:
        return self._partition


@pytest.fixture
def producer() -> FakeProducer:
    return FakeProducer()


def c_sender(producer: FakeProducer, on_success: Callable[[], object] | None = None) -> Any:
    assert native is not None
    future_type = type(
        "_RecordDelivery",
        (_FastRecordDelivery,),
        {
            "__slots__": (),
            "_sender": producer,
            "_on_success": None if on_success is None else staticmethod(on_success),
        },
    )
    return native.RecordSender(
        producer=producer,
        future_type=future_type,
        produce=producer.produce,
        topic="tasks",
        sends=itertools.count(1),
        poll=producer.poll,
        slow_send=producer.slow_send,
        poll_every=4,
    )


def test_a_send_queues_the_record_with_its_future_as_the_delivery_report(producer) -> None:
    future = c_sender(producer)("orders-1", b"{}")
    assert producer.queued == [("tasks", b"{}", "orders-1", -1, future)]
    assert isinstance(future, Future) and future.running() and not future.done()


def test_a_delivery_resolves_the_future_to_the_partition_and_counts_it_first(producer) -> None:
    seen: list[bool] = []
    future = c_sender(producer, on_success=lambda: seen.append(future.done()))("k", b"{}")
    future(None, Message(3))
    assert future.done() and future.result() == 3 and future.exception() is None
    assert seen == [False]  # counted before the future showed done
    other = c_sender(producer)("k", b"{}")
    other(None, Message(None))
    assert other.result(0) == 0


def test_a_failed_delivery_fails_the_future_with_the_senders_error(producer) -> None:
    future = c_sender(producer, on_success=lambda: pytest.fail("counted"))("k", b"{}")
    future("broker gone", Message(1))
    with pytest.raises(RuntimeError, match="not delivered: broker gone"):
        future.result(0)
    assert [error for error, _ in producer.failures] == ["broker gone"]


def test_the_delivery_report_and_result_are_c_where_it_is_built() -> None:
    assert type(_FastRecordDelivery.__dict__["__call__"]).__name__ == "method_descriptor"
    assert type(_FastRecordDelivery.__dict__["result"]).__name__ == "method_descriptor"
    assert "__call__" in _RecordDelivery.__dict__  # the Python reference, beside it


@pytest.mark.parametrize("made", [False, True], ids=["settled in its field", "made first"])
def test_a_second_delivery_report_is_an_error(producer, made) -> None:
    future = c_sender(producer)("k", b"{}")
    if made:
        future.add_done_callback(lambda _: None)
    future(None, Message(2))
    with pytest.raises(InvalidStateError):
        future(None, Message(3))
    assert future.result(0) == 2


def test_racing_waiters_and_c_reports_never_lose_a_wake_up(producer) -> None:
    send = c_sender(producer)
    futures = [send("k", b"{}") for _ in range(2000)]
    results: list[int] = []

    def report_all() -> None:
        for n, future in enumerate(futures):
            future(None, Message(n))

    def consume() -> None:
        for n, future in enumerate(futures):
            if n % 3 == 0:  # some wait through concurrent.futures.wait, making the Future part
                wait([future], timeout=10)
            results.append(future.result(10))

    threads = [threading.Thread(target=report_all), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == list(range(2000))


def test_a_pending_result_waits_in_python_and_times_out(producer) -> None:
    future = c_sender(producer)("k", b"{}")
    with pytest.raises(TimeoutError):
        future.result(0.01)
    with pytest.raises(TimeoutError):
        future.result(timeout=0.01)
    with pytest.raises(TypeError):
        future.result(1, 2, 3)


def test_a_waiting_thread_wakes_when_the_report_comes(producer) -> None:
    future = c_sender(producer)("k", b"{}")
    results: list[int] = []
    waiter = threading.Thread(target=lambda: results.append(future.result(10)))
    waiter.start()
    while not future._made:  # the waiter has asked for the `Future` part
        threading.Event().wait(0.001)
    future(None, Message(5))
    waiter.join(10)
    assert results == [5]


def test_callbacks_wait_and_as_completed_see_c_resolved_futures(producer) -> None:
    send = c_sender(producer)
    futures = [send("k", b"{}") for _ in range(3)]
    seen: list[int] = []
    futures[0].add_done_callback(lambda done: seen.append(done.result()))
    futures[0](None, Message(7))
    assert seen == [7]
    done, pending = wait(futures, timeout=0, return_when=FIRST_COMPLETED)
    assert done == {futures[0]} and len(pending) == 2
    for future in futures[1:]:
        future(None, Message(1))
    assert sorted(f.result() for f in as_completed(futures, timeout=1)) == [1, 1, 7]


def test_the_send_makes_each_future_by_calling_the_class_it_was_given(producer) -> None:
    send = c_sender(producer)
    first, second = send("k", b"{}"), send("k", b"{}")
    assert first is not second and type(first) is type(second)
    assert issubclass(type(first), _FastRecordDelivery) and isinstance(first, Future)
    assert not first._made  # nothing asked for more than the outcome yet


def test_settings_changed_from_other_threads_are_read_whole() -> None:
    assert native is not None
    scheduler = native.TaskScheduler(
        send=print,
        slow=print,
        failed=print,
        dumps=codec.DUMPS,
        dumps_option=codec.DUMPS_OPTIONS,
        validate=None,
        grace_ns=0,
        max_data_bytes=0,
    )

    def flip(n: int) -> None:
        for i in range(2000):
            scheduler.grace_ns = i * n
            scheduler.validate = None if i % 2 else print

    threads = [threading.Thread(target=flip, args=(n,)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert scheduler.grace_ns in (1999, 3998) and scheduler.validate is None
    scheduler.max_data_bytes = 7
    assert scheduler.max_data_bytes == 7
    with pytest.raises(AttributeError):
        del scheduler.validate
    with pytest.raises(TypeError):
        scheduler.grace_ns = "soon"  # type: ignore[assignment]


def test_a_reference_cycle_through_a_future_is_collected(producer) -> None:
    future = c_sender(producer)("k", b"{}")

    class Holder:
        pass

    holder = Holder()
    holder.future = future  # type: ignore[attr-defined]
    future.holder = holder  # the cycle: holder -> future -> holder
    gone = weakref.ref(holder)
    producer.queued.clear()  # librdkafka's reference, dropped once the report is served
    del holder, future
    gc.collect()
    assert gone() is None


def test_the_send_serves_delivery_reports_every_few_sends(producer) -> None:
    send = c_sender(producer)
    for _ in range(8):
        send("k", b"{}")
    assert producer.polls == 2  # every 4th send, as configured


@pytest.mark.parametrize("refusal", [BufferError, ValueError])
def test_a_record_produce_refuses_goes_to_the_python_send(producer, refusal) -> None:
    producer.refuse = refusal
    future = c_sender(producer)("k", b"value")
    assert producer.slow_sends == [("k", b"value")] and future.result(0) == -1


def test_a_closed_producer_sends_through_python_which_says_so(producer) -> None:
    producer._open = False
    c_sender(producer)("k", b"value")
    assert producer.slow_sends == [("k", b"value")] and producer.queued == []


def test_the_send_refuses_a_future_type_that_is_not_a_class() -> None:
    assert native is not None
    with pytest.raises(TypeError, match="future_type"):
        native.RecordSender(
            producer=FakeProducer(),
            future_type=42,  # type: ignore[arg-type]
            produce=print,
            topic="t",
            sends=itertools.count(),
            poll=print,
            slow_send=print,
            poll_every=1,
        )


# ---- schedule_task --------------------------------------------------------------------------


class CapturingLog:
    """A log whose producer keeps what it is given and acknowledges at once: all of the log a
    client uses."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, bytes]] = []
        self.fail_with: Exception | None = None

    def producer(self) -> LogProducer:
        log = self

        class Producer(LogProducer):
            def send(self, key: Any, value: bytes, *, on_durable: Any = None) -> Future[int]:
                if log.fail_with is not None:
                    raise log.fail_with
                log.sent.append((key, value))
                future: Future[int] = Future()
                future.set_result(0)
                return future

            def flush(self, timeout: float) -> int:
                return 0

            def close(self) -> None:
                pass

        return Producer()


@pytest.fixture(params=["c", "python"])
def client_path(request, monkeypatch) -> Iterator[str]:
    monkeypatch.setenv(speedups.ENV, "1" if request.param == "c" else "0")
    yield request.param


def clients() -> tuple[SchedulerClient, CapturingLog]:
    log = CapturingLog()
    return SchedulerClient(log=log), log  # type: ignore[arg-type]


def some_tasks() -> list[Task]:
    return [
        Task("orders-42", soon(60_000), "a"),
        Task("user:ñandú", soon(60_000), "b", {"n": [1, 2.5, "x"], "ok": True}),
        Task('quote"d', soon(60_000), "c", {"note": "nullify"}),  # escaping; "null" in text
        Task("in-grace", soon(-2_000), "d"),
    ]


def test_schedule_task_sends_the_same_records_on_both_paths(monkeypatch) -> None:
    records = {}
    tasks = some_tasks()
    for path in ("1", "0"):
        monkeypatch.setenv(speedups.ENV, path)
        client, log = clients()
        assert (client._c_path is not None) == (path == "1")
        assert [client.schedule_task(task).result(0) for task in tasks] == [0] * len(tasks)
        records[path] = log.sent
    assert records["1"] == records["0"]
    assert records["1"][0] == (
        "orders-42",
        b'{"v":1,"op":"schedule","oid":"orders-42","at":%d,"uk":"a","data":{}}'
        % tasks[0].scheduled_ms,
    )


def test_a_client_made_with_the_c_path_off_encodes_in_python_too() -> None:
    # The measure of a build without a C compiler (the bench's Python side) and a way to rule
    # the C path out: the record's encoding must leave it too, not only the send.
    with speedups.turned_off():
        assert codec.schedule_encoder() is codec.encode_schedule_in_python
        assert clients()[0]._encode is codec.encode_schedule_in_python
    assert clients()[0]._encode is codec.encode_schedule


def test_refusals_are_the_same_on_both_paths(client_path) -> None:
    client, log = clients()
    with pytest.raises(TaskInPastError, match="grace window of 10s"):
        client.schedule_task(Task("o", soon(-11_000), "k")).result(0)
    with pytest.raises(TaskDataError, match="over the limit"):
        client.schedule_task(Task("o", soon(1000), "k", {"x": "y" * 300_000})).result(0)
    with pytest.raises(TaskDataError):
        client.schedule_task(Task("o", soon(1000), "k", {"x": math.inf})).result(0)
    with pytest.raises(AttributeError):
        client.schedule_task(object()).result(0)  # type: ignore[arg-type]
    assert log.sent == []


def test_settings_changed_after_the_client_was_made_hold_on_both_paths(client_path) -> None:
    client, log = clients()
    refused: list[Task] = []

    def validate(task: Task) -> None:
        refused.append(task)
        raise TaskDataError("not this one")

    client.validate = validate
    with pytest.raises(TaskDataError, match="not this one"):
        client.schedule_task(some_tasks()[0]).result(0)
    client.validate = None
    client.grace_window_ms = 60_000
    client.schedule_task(Task("o", soon(-30_000), "k")).result(0)
    client.max_data_bytes = 10
    with pytest.raises(TaskDataError):
        client.schedule_task(Task("o", soon(1000), "k", {"x": "y" * 20})).result(0)
    assert len(refused) == 1 and len(log.sent) == 1


def test_an_error_of_the_log_fails_the_future_on_both_paths(client_path) -> None:
    client, log = clients()
    log.fail_with = RuntimeError("log down")
    with pytest.raises(RuntimeError, match="log down"):
        client.schedule_task(some_tasks()[0]).result(0)


def test_an_interrupt_is_not_turned_into_a_failed_future(client_path) -> None:
    client, log = clients()
    log.fail_with = KeyboardInterrupt()  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        client.schedule_task(some_tasks()[0])


def test_a_subclass_overriding_schedule_task_keeps_its_override(monkeypatch) -> None:
    monkeypatch.setenv(speedups.ENV, "1")

    class Counting(SchedulerClient):
        calls = 0

        def schedule_task(self, task: Task) -> Future[int]:
            Counting.calls += 1
            return super().schedule_task(task)

    log = CapturingLog()
    Counting(log=log).schedule_task(some_tasks()[0]).result(0)  # type: ignore[arg-type]
    assert Counting.calls == 1 and len(log.sent) == 1
