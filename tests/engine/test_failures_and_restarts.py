"""Failures inside the engine: partition restarts, reloads, revocation, graceful stop."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from scheduler import Task, TaskState
from scheduler.engine.settings import EngineSettings
from scheduler.executors.abc import ExecutionContext
from scheduler.model import TaskKey
from scheduler.partitioning import partition_for
from scheduler.testing import TEST_SETTINGS, embedded_engine
from scheduler.worker import Worker
from tests.engine.flaky import FlakyStore, flaky_wrapper
from tests.engine.helpers import Recorder, bare_context, soon

PARTITIONS = 4


def ids_on_partition(partition: int, count: int, prefix: str = "id") -> list[str]:
    found, i = [], 0
    while len(found) < count:
        candidate = f"{prefix}-{i}"
        if partition_for(candidate.encode(), PARTITIONS) == partition:
            found.append(candidate)
        i += 1
    return found


def enqueue_all(engine, tasks):
    for future in [engine.client.schedule_task(task) for task in tasks]:
        future.result(timeout=10)


def test_a_failing_partition_restarts_from_the_store_and_the_others_keep_running(data_dir):
    recorder = Recorder()
    flaky, wrap = flaky_wrapper()
    with embedded_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        flaky[0].fail_next("record_statuses", partition=2)
        # Due once every row is stored: the first status write is then the status flush's,
        # where an error that is not the store being unavailable fails the tree. (Written
        # with a batch of rows, it would pause the partition as a refused persist instead.)
        tasks = [Task(f"o{i}", soon(2000 + i), "k") for i in range(200)]
        enqueue_all(engine, tasks)
        engine.join(raise_failures=False)
        failures = engine.worker.failures()
        generations = engine.worker.topic.generations.get()
    assert [failure.partition for failure in failures] == [2]
    assert generations == {0: 1, 1: 1, 2: 2, 3: 1}
    assert set(recorder.keys()) == {task.key for task in tasks}


def test_tasks_in_flight_in_a_dead_partition_are_reloaded_not_lost(data_dir):
    recorder = Recorder()
    flaky, wrap = flaky_wrapper()
    ids = ids_on_partition(1, 30)
    with embedded_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        # The tracker's status write dies while a burst sits in the partition's mailboxes.
        flaky[0].fail_next("record_statuses", partition=1, times=2)
        tasks = [Task(oid, soon(k), f"k{k}") for oid in ids for k in range(5)]
        enqueue_all(engine, tasks)
        engine.join(raise_failures=False)
        assert engine.worker.failures()
        statuses = engine.store.fetch_statuses(1, [task.key for task in tasks])
    assert {status.state for status in statuses.values()} == {TaskState.SUCCEEDED}
    assert len(statuses) == len(tasks)


def test_tasks_that_finished_while_statuses_could_not_be_written_do_not_run_again(data_dir):
    """The store refuses one partition's status writes for a while (a node restarting): its
    tree dies and is restarted, and the new tree writes the finishes the old one could not,
    instead of running those tasks again when it reloads their rows."""
    recorder = Recorder()
    flaky: list[FlakyStore] = []
    away = threading.Event()

    def wrap(store):
        flaky.append(FlakyStore(store))
        flaky[0].should_fail = lambda method, p: (
            method == "record_statuses" and p == 1 and away.is_set()
        )
        return flaky[0]

    tasks = [Task(oid, soon(300), "k") for oid in ids_on_partition(1, 20)]
    with embedded_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        away.set()
        enqueue_all(engine, tasks)
        deadline = time.monotonic() + 10
        while len(set(recorder.keys())) < len(tasks) and time.monotonic() < deadline:
            time.sleep(0.05)
        while flaky[0].injected < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the tree failed and was restarted a few times
        assert flaky[0].injected >= 3
        away.clear()
        engine.join(raise_failures=False)
        assert engine.worker.failures()
        statuses = engine.store.fetch_statuses(1, [task.key for task in tasks])
    assert sorted(recorder.keys()) == sorted(task.key for task in tasks)  # each ran once
    assert {status.state for status in statuses.values()} == {TaskState.SUCCEEDED}
    assert len(statuses) == len(tasks)


def test_attempts_running_when_the_status_writes_fail_succeed_once(data_dir):
    """The tracker dies on a status write while attempts run: the tree's executor stays up to
    take their outcomes and cancel them, so no attempt finishes unseen and runs again.

    An attempt the tree's stop cancelled just after its last look at the cancel returns, and is
    run again (at-least-once: test_task_executor.py); only such runs may be followed by another."""
    runs: dict[TaskKey, list[ExecutionContext]] = defaultdict(list)
    lock = threading.Lock()

    def executor(task, context):
        if context.cancelled.wait(0.03):
            context.raise_if_cancelled()
        with lock:
            runs[task.key].append(context)

    flaky: list[FlakyStore] = []
    away = threading.Event()

    def unreachable(method: str, partition: int) -> bool:
        """A store that answers slowly and refuses status writes: the tracker dies first, and
        the tree takes a while to come down (its controller finishes the load it is in)."""
        if partition != 1 or not away.is_set() or method not in {"load_tasks", "record_statuses"}:
            return False
        time.sleep(0.2)
        return method == "record_statuses"

    def wrap(store):
        flaky.append(FlakyStore(store))
        flaky[0].should_fail = unreachable
        return flaky[0]

    due = soon(300)
    tasks = [Task(oid, due, f"k{k}") for oid in ids_on_partition(1, 8) for k in range(5)]
    with embedded_engine(executor, data_dir=data_dir, wrap_store=wrap) as engine:
        away.set()
        enqueue_all(engine, tasks)
        deadline = time.monotonic() + 10
        while flaky[0].injected < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        away.clear()
        engine.join(raise_failures=False)
        assert engine.worker.failures()
    assert set(runs) == {task.key for task in tasks}
    ran_again = {key: [c.reason for c in contexts] for key, contexts in runs.items()}
    assert all(None not in reasons[:-1] for reasons in ran_again.values()), ran_again


def test_after_assignment_every_incomplete_task_is_reloaded_however_old(data_dir):
    recorder = Recorder()
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        long_ago = datetime.now(UTC) - timedelta(days=40)
        old = [Task(f"old-{i}", long_ago + timedelta(hours=i), "k") for i in range(30)]
        for task in old:  # rows a previous owner persisted but never ran
            engine.store.write_tasks(partition_for(task.ordering_id.encode(), PARTITIONS), [task])
        engine.worker.topic.revoke(list(range(PARTITIONS)), 1.0, "test").get()
        engine.worker.topic.assign(list(range(PARTITIONS))).get()
        engine.join()
    assert {task.key for task in old} <= set(recorder.keys())


def test_a_new_worker_on_the_same_data_runs_what_the_stopped_one_left(data_dir):
    first, second = Recorder(), Recorder()
    now_tasks = [Task(f"o{i}", soon(), "now") for i in range(20)]
    later = [Task(f"o{i}", soon(2_000), "later") for i in range(20)]
    with embedded_engine(first, data_dir=data_dir) as engine:
        enqueue_all(engine, now_tasks + later)
        engine.join(include_future=False)
    assert set(first.keys()) == {task.key for task in now_tasks}
    with embedded_engine(second, data_dir=data_dir) as engine:
        engine.join()
    assert set(second.keys()) == {task.key for task in later}


def test_a_revoked_partition_lets_running_tasks_finish_then_cancels_them(data_dir):
    cancelled: dict[TaskKey, str] = {}
    seen_by_second: set[TaskKey] = set()
    started: set[TaskKey] = set()
    lock = threading.Condition()

    def first_executor(task, context):
        with lock:
            started.add(task.key)
            lock.notify_all()
        context.cancelled.wait(30)
        with lock:
            cancelled[task.key] = context.reason

    def second_executor(task, context):
        with lock:
            seen_by_second.add(task.key)
            lock.notify_all()

    settings = EngineSettings(shutdown_deadline_s=0.3, retry=TEST_SETTINGS.retry)
    with embedded_engine(first_executor, data_dir=data_dir, settings=settings) as engine:
        tasks = [Task(ids_on_partition(p, 1, "r")[0], soon(), "k") for p in range(PARTITIONS)]
        enqueue_all(engine, tasks)
        with lock:  # every one running: the second worker's join revokes some at once
            assert lock.wait_for(lambda: len(started) == len(tasks), timeout=10)
        second = Worker(
            log=engine.log,
            store=engine.store,
            executor=second_executor,
            settings=settings,
            group_id=engine.worker.group_id,
            client_id="second",
        )
        second.start()
        try:
            assert second.wait_until_assigned(30)
            moved = set(second.owned_partitions())
            moved_keys = {t.key for t in tasks if partition_for(t.ordering_id.encode(), 4) in moved}
            with lock:
                assert lock.wait_for(lambda: moved_keys <= seen_by_second, timeout=30)
        finally:
            second.stop(30)
    assert moved and moved != set(range(PARTITIONS))
    assert {cancelled[key] for key in moved_keys} == {"partition revoked"}


def test_tasks_pushed_past_the_in_flight_bound_wait_in_the_store_then_all_run(data_dir):
    # A burst of due tasks arriving faster than they run must not pile up in memory: pushes
    # beyond the bound stay in the store and are loaded as room frees up.
    recorder = Recorder()
    recorder.block = lambda task: True
    settings = replace(TEST_SETTINGS, max_in_flight_per_partition=20, pool_size=2)
    ids = ids_on_partition(1, 400)
    far = datetime.now(UTC) + timedelta(days=1)
    with embedded_engine(recorder, data_dir=data_dir, settings=settings) as engine:
        enqueue_all(engine, [Task(ids[0], soon(), "first")])
        while not recorder.keys():  # loaded and running: the checkpoint is ahead of now
            threading.Event().wait(0.01)
        tasks = [Task(oid, soon(), "burst") for oid in ids[1:]]
        enqueue_all(engine, tasks)
        while len(engine.store.load_tasks(1, None, int(far.timestamp() * 1000), 1000)) < 400:
            threading.Event().wait(0.01)  # all persisted (and pushed, or left in the store)
        counts = engine.worker.topic.counts().get()[1]
        assert counts.scheduled + counts.executing <= 40, counts
        recorder.release.set()
        engine.join()
    assert set(recorder.keys()) >= {task.key for task in tasks}


def test_a_partition_whose_writes_keep_failing_backs_off_then_loses_nothing(data_dir, caplog):
    """A store that refuses one partition's writes (`BackendUnavailableError`) for a while: the
    partition is paused, holding its batch, and the store is probed with it after 0.5, 1,
    2 s..., not at the pace of the poll loop, and once the store takes writes again every task
    runs; the other partitions never stop, and no tree is restarted (a refusal is no bug)."""
    recorder = Recorder()
    flaky: list[FlakyStore] = []
    refusing = threading.Event()
    refusing.set()

    def wrap(store):
        flaky.append(FlakyStore(store))
        flaky[0].unavailable = True
        flaky[0].should_fail = lambda method, p: (
            method == "write_tasks" and p == 1 and refusing.is_set()
        )
        return flaky[0]

    settings = replace(TEST_SETTINGS, restart_backoff_s=0.5)
    caplog.set_level("INFO", logger="scheduler.worker")
    with embedded_engine(recorder, data_dir=data_dir, settings=settings, wrap_store=wrap) as engine:
        refused = [Task(oid, soon(), "k") for oid in ids_on_partition(1, 5)]
        others = [Task(oid, soon(), "k") for oid in ids_on_partition(2, 5)]
        enqueue_all(engine, refused + others)
        time.sleep(3.0)
        # Attempts at 0, 0.5, 1.5 s and 3.5 s: three or four in 3 s however slow the machine
        # (one a poll would be a dozen or more).
        attempts = flaky[0].injected
        assert 1 <= attempts <= 4, attempts
        assert set(recorder.keys()) == {task.key for task in others}
        refusing.clear()
        engine.join()
        assert engine.worker.failures() == []
    assert sorted(recorder.keys()) == sorted(task.key for task in refused + others)
    messages = [record.getMessage() for record in caplog.records]
    delays = [m.split("probed again in ")[1].split(" s")[0] for m in messages if "again in" in m]
    assert delays == ["0.5"]  # the first failure; its repeats are said once a minute
    assert any("partition 1 is persisting again after" in m for m in messages)


def test_a_store_failing_every_read_at_once_costs_one_line_a_partition_and_bounded_memory(
    data_dir, caplog, monkeypatch
):
    """Every load fails at once, as with a permission revoked: each partition fails again and
    again. The worker lives on, logs each partition's first failure only (the repeats once a
    minute), keeps the first KEPT_FAILURES failures, not all of them (their tracebacks hold the
    dead trees), and runs what was enqueued once the store answers again."""
    from scheduler.actors import topic_supervisor
    from scheduler.actors.topic_supervisor import KEPT_FAILURES

    monkeypatch.setattr(topic_supervisor, "MAX_RESTART_BACKOFF_S", 0.2)  # many failures, soon
    recorder = Recorder()
    flaky, wrap = flaky_wrapper()
    with embedded_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        flaky[0].should_fail = lambda method, partition: method == "load_tasks"
        deadline, restarting_seen = time.monotonic() + 30, set()
        while flaky[0].injected < 3 * KEPT_FAILURES and time.monotonic() < deadline:
            restarting_seen.update(engine.worker.health().restarting)
            time.sleep(0.1)
        assert flaky[0].injected >= 3 * KEPT_FAILURES
        assert engine.worker.topic.actor_ref.is_alive()
        assert len(engine.worker.failures()) == KEPT_FAILURES
        # The probes named the partitions waiting for their restart (each is, most of the time).
        assert restarting_seen == set(range(PARTITIONS))

        tasks = [Task(f"o{i}", soon(i), "k") for i in range(20)]
        enqueue_all(engine, tasks)
        flaky[0].should_fail = lambda method, partition: False
        engine.join(raise_failures=False)
        assert engine.worker.health().restarting == []
    assert set(recorder.keys()) == {task.key for task in tasks}
    first_lines = [
        r.getMessage() for r in caplog.records if " failed (InjectedFailure" in r.getMessage()
    ]
    assert sorted(first_lines) == sorted(
        f"partition {p} failed (InjectedFailure: injected failure of load_tasks on partition {p}); "
        "restarting it from the store"
        for p in range(PARTITIONS)
    )


def test_a_tree_that_dies_as_it_starts_is_restarted_and_the_other_partitions_keep_running(
    data_dir, monkeypatch
):
    """Whatever kills a partition's tree while it starts stays that partition's failure: the
    topic's supervisor, which every partition of the worker hangs from, lives on."""
    from scheduler.actors.partition_supervisor import PartitionSupervisor

    started = PartitionSupervisor.start
    dying = {"left": 1}

    def start(self) -> None:
        if self.ctx.partition == 2 and dying["left"]:
            dying["left"] -= 1
            raise RuntimeError("tree died as it started")
        started(self)

    monkeypatch.setattr(PartitionSupervisor, "start", start)
    recorder = Recorder()
    with embedded_engine(recorder, data_dir=data_dir) as engine:
        tasks = [Task(oid, soon(0), "k") for oid in ids_on_partition(2, 3) + ids_on_partition(0, 3)]
        enqueue_all(engine, tasks)
        engine.join(raise_failures=False)
        assert engine.worker.topic.actor_ref.is_alive()
        failures = engine.worker.failures()
        generations = engine.worker.topic.generations.get()
    assert [failure.partition for failure in failures] == [2]
    assert generations[2] == 2 and generations[0] == 1
    assert set(recorder.keys()) == {task.key for task in tasks}


def test_a_success_reported_as_the_partition_executor_stops_is_kept_for_the_next_tree() -> None:
    """pykka drops what is left in a stopping actor's mailbox: an attempt that finished just
    before its PartitionExecutor stopped had its report dropped with it, its success was
    neither written nor kept, and the next tree ran the task again (a Cassandra restart under
    load, CI 2026-11-26)."""
    from scheduler.actors.partition_executor import PartitionExecutor
    from scheduler.engine.messages import AttemptFinished
    from scheduler.engine.timers import TimerService

    class Holdable(PartitionExecutor):
        started: list[PartitionExecutor] = []

        def on_start(self) -> None:
            super().on_start()
            self.started.append(self)

        def hold(self, holding: threading.Event, release: threading.Event) -> None:
            holding.set()
            release.wait(10)

    ctx = bare_context(TimerService())
    ref = Holdable.start(ctx)
    holding, release = threading.Event(), threading.Event()
    ref.proxy().hold(holding, release)  # the actor is busy...
    assert holding.wait(10)
    ref.stop(block=False)  # ...so the stop waits in its mailbox
    key = TaskKey.from_ms("o", 1, "u")
    executor = Holdable.started[0]
    executor._report(AttemptFinished(key, 1, None, None))  # its report goes in behind the stop
    release.set()
    ref.actor_stopped.wait(10)
    ctx.timers.stop()
    kept = ctx.unflushed.peek([key])
    assert kept and kept[key].state is TaskState.SUCCEEDED


def test_a_failed_tree_going_down_slowly_holds_up_neither_the_worker_nor_the_restart(data_dir):
    """A partition's tree fails while one of its actors is inside a store call that an outage
    holds (retries against a Cassandra node going away). The TopicSupervisor used to wait for
    that tree to go down, and with it the worker's poll loop, which asks it for every batch:
    the loop fell silent for 5 s and /healthz said stalled (CI, 2026-11-26). The new tree
    starts once the old one is down."""
    recorder = Recorder()
    hang, release = threading.Event(), threading.Event()
    flaky: list[FlakyStore] = []

    def slow_loads(method: str, partition: int) -> bool:
        if method == "load_tasks" and partition == 1 and hang.is_set():
            release.wait(20)  # the call the outage holds
        return False

    def wrap(store):
        flaky.append(FlakyStore(store))
        flaky[0].should_fail = slow_loads
        return flaky[0]

    with embedded_engine(recorder, data_dir=data_dir, wrap_store=wrap) as engine:
        topic = engine.worker.topic
        hang.set()
        time.sleep(0.5)  # partition 1's next load (every 100 ms) is in the store now
        generation = topic.generations.get()[1]
        topic.partition_failed(1, generation, RuntimeError("an actor of the tree died"))
        started = time.monotonic()
        assert topic.owned().get(timeout=5) == [0, 2, 3]  # answered while the tree goes down
        assert time.monotonic() - started < 2
        time.sleep(0.5)  # past the restart's delay: it waits for the old tree
        assert topic.generations.get()[1] == generation
        release.set()
        task = Task(ids_on_partition(1, 1)[0], soon(0), "after")
        engine.client.schedule_task(task).result(10)
        engine.join(raise_failures=False)
        assert topic.generations.get()[1] == generation + 1
    assert recorder.keys() == [task.key]
