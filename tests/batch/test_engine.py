"""Batch jobs on the embedded engine, end to end: real commands run as runs, their ends come
back through the events subscriber, and the decisions read a clock the test sets."""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path

from scheduler.batch.api import BatchJobs
from scheduler.batch.state import Status
from scheduler.batch.store import AttemptStatus, StoredConfiguration
from scheduler.model import Task
from scheduler.programs.model import RunStatus, StarterKind
from scheduler.stores.batch_sqlite import SqliteBatchStore
from tests.batch.engine_helpers import PY, Batch, batch_engine
from tests.batch.helpers import P, seed_config, seed_job
from tests.cli.helpers import wait_for

TRUE = [PY, "-c", "pass"]
FALSE = [PY, "-c", "import sys; sys.exit(3)"]


def hours(start: int, stop: int) -> list[int]:
    return [P(f"2000-01-01 {h:02d}:00:00") for h in range(start, stop)]


def finished(b: Batch, job: str, count: int) -> bool:
    state = b.states().get(job)
    return state is not None and not state.running and state.done.count_between(0, 10**6) >= count


def test_a_job_waiting_for_its_own_previous_hour_shows_its_first_partition_blocked_forever(
    tmp_path: Path,
) -> None:
    job = seed_job("a", command=TRUE, dependencies=[{"name": "a", "shift": "-1 hours"}])
    with batch_engine(tmp_path) as b:
        b.load(seed_config(job))
        views = b.settle(lambda: b.jobs.configuration() and b.jobs.partitions("a"))
        assert b.runs.list_runs() == []
    assert len(views) == 24
    assert {v.status for v in views} == {Status.BLOCKED_FOREVER}
    assert "a 1999-12-31 23:00:00 is before a's first partition" in (views[0].reason or "")
    assert "a 2000-01-01 00:00:00 is blocked forever" in (views[1].reason or "")


def test_the_seed_example_runs_every_hour_and_its_dependant_but_its_first(tmp_path: Path) -> None:
    one = seed_job("job1", command=TRUE, end_partition="2000-01-01 06:00:00")
    two = seed_job(
        "job2",
        command=FALSE,
        end_partition="2000-01-01 06:00:00",
        on_failure="mark_success",
        dependencies=[
            {"name": "job1", "shift": "0 seconds"},
            {"name": "job1", "shift": "-1 hours"},
        ],
    )
    with batch_engine(tmp_path) as b:
        b.load(seed_config(one, two))
        b.settle(lambda: finished(b, "job1", 6) and finished(b, "job2", 5))
        views = {v.partition: v for v in b.jobs.partitions("job2")}
        history = b.jobs.history("job2")
        runs = b.runs.list_runs(limit=100)
    assert views[P("2000-01-01 00:00:00")].status is Status.BLOCKED_FOREVER
    assert {views[p].status for p in hours(1, 6)} == {Status.MARKED_SUCCESS}
    assert {a.status for a in history} == {AttemptStatus.MARKED_SUCCESS}
    assert all("exit" in (a.reason or "") or "code 3" in (a.reason or "") for a in history)
    assert len(runs) == 11
    assert {r.started_by.kind for r in runs} == {StarterKind.BATCH_JOB}
    assert {str(r.started_by) for r in runs} == {"batch-job:job1", "batch-job:job2"}
    assert {r.status for r in runs if r.started_by.name == "job2"} == {RunStatus.FAILED}


def _peak(intervals: list[tuple[int, int]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def test_the_tighter_of_the_global_and_the_job_limits_holds_with_real_runs(
    tmp_path: Path,
) -> None:
    sleep = [PY, "-c", "import time; time.sleep(0.3)"]
    narrow = seed_job("narrow", command=sleep, end_partition="2000-01-01 06:00:00",
                      max_parallelism=1)  # fmt: skip
    wide = seed_job("wide", command=sleep, end_partition="2000-01-01 06:00:00", max_parallelism=5)
    with batch_engine(tmp_path) as b:
        b.load(seed_config(narrow, wide, max_parallelism=3))
        b.settle(lambda: finished(b, "narrow", 6) and finished(b, "wide", 6), timeout=60)
        runs = b.runs.list_runs(limit=100)
    spans = {
        name: [(r.started_ms or 0, r.ended_ms or 0) for r in runs if r.started_by.name == name]
        for name in ("narrow", "wide")
    }
    assert _peak(spans["narrow"]) == 1
    assert _peak(spans["narrow"] + spans["wide"]) <= 3
    assert _peak(spans["wide"]) >= 2  # the limits were what held it, not a lack of work


def test_a_reload_moving_the_start_earlier_backfills_and_later_keeps_the_records(
    tmp_path: Path,
) -> None:
    def job(start: str) -> dict[str, object]:
        return seed_job("a", command=TRUE, start_partition=start,
                        end_partition="2000-01-01 06:00:00")  # fmt: skip

    with batch_engine(tmp_path) as b:
        b.load(seed_config(job("2000-01-01 03:00:00")))
        b.settle(lambda: finished(b, "a", 3))
        b.load(seed_config(job("2000-01-01 01:00:00")))
        b.settle(lambda: finished(b, "a", 5))
        earlier = {a.partition for a in b.jobs.history("a")}
        b.load(seed_config(job("2000-01-01 04:00:00")))
        later = b.settle(lambda: b.jobs.configuration() and b.jobs.partitions("a"))
        assert b.jobs.configuration().job("a").start == P("2000-01-01 04:00:00")  # type: ignore[union-attr]
        runs = b.runs.list_runs(limit=100)
    assert earlier == set(hours(1, 6))
    assert [(v.partition, v.status) for v in later] == [
        (P("2000-01-01 04:00:00"), Status.SUCCEEDED),
        (P("2000-01-01 05:00:00"), Status.SUCCEEDED),
    ]
    assert len(runs) == 5  # nothing ran again


def test_an_invalid_file_at_reload_is_left_in_place_and_the_last_good_one_stays(
    tmp_path: Path,
) -> None:
    file = tmp_path / "jobs.json"
    good = seed_config(seed_job("a", command=TRUE, end_partition="2000-01-01 02:00:00"))
    with batch_engine(tmp_path, file=file) as b:
        import json

        file.write_text(json.dumps(good))
        b.send("poll")
        b.settle(lambda: finished(b, "a", 2))
        assert not file.exists()
        assert Path(f"{file}_IMPORTED").read_text() == json.dumps(good)
        file.write_text('{"max_parallelism": 1, "jobs": [{"name": "a"}]}')
        b.send("poll")
        b.engine.join(include_future=False)
        assert file.exists()  # left for the operator to fix
        config = b.jobs.configuration()
    assert config is not None and [j.name for j in config.jobs] == ["a"]
    assert config.job("a").end == P("2000-01-01 02:00:00")


def test_a_command_that_cannot_start_is_a_failed_run_whose_reason_is_in_its_stderr_file(
    tmp_path: Path,
) -> None:
    err = tmp_path / "out" / "err [[partition]].txt"
    job = seed_job(
        "a",
        command=[str(tmp_path / "no-such-program"), "[[partition]]"],
        end_partition="2000-01-01 01:00:00",
        retry_delay="1 days",
        stdout_path=str(tmp_path / "out" / "out.txt"),
        stderr_path=str(err),
    )
    with batch_engine(tmp_path) as b:
        b.load(seed_config(job))
        failed = b.settle(lambda: b.jobs.partitions("a", statuses={Status.FAILED}))
        history = b.jobs.history("a")
    written = (tmp_path / "out" / "err 2000-01-01 00:00:00.txt").read_text()
    assert "cannot start" in written and "no-such-program" in written
    assert failed[0].retry_at == P("2000-01-03 00:00:00")
    assert "cannot start" in (failed[0].reason or "")
    assert [(a.attempt, a.status) for a in history] == [(1, AttemptStatus.FAILED)]


def test_a_paused_job_starts_nothing_until_resumed(tmp_path: Path) -> None:
    job = seed_job("a", command=TRUE, end_partition="2000-01-01 03:00:00")
    with batch_engine(tmp_path, at="2000-01-01 00:00:00") as b:
        b.load(seed_config(job))
        b.settle(lambda: b.jobs.configuration())
        b.jobs.pause("a")
        b.clock.set("2000-01-02 00:00:00")
        b.send("decide")
        b.engine.join(include_future=False)
        assert b.runs.list_runs() == []
        assert [r.paused for r in b.jobs.jobs()] == [True]
        b.jobs.resume("a")
        b.settle(lambda: finished(b, "a", 3))


def test_a_retry_waits_its_delay_and_a_rerun_runs_succeeded_partitions_again(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "ok"
    check = [PY, "-c", f"import os, sys; sys.exit(0 if os.path.exists({str(flag)!r}) else 1)"]
    job = seed_job("a", command=check, end_partition="2000-01-01 01:00:00",
                   retry_delay="15 minutes")  # fmt: skip
    with batch_engine(tmp_path) as b:
        b.load(seed_config(job))
        failed = b.settle(lambda: b.jobs.partitions("a", statuses={Status.FAILED}))
        assert failed[0].retry_at == P("2000-01-02 00:15:00")
        flag.touch()
        b.send("decide")
        b.engine.join(include_future=False)
        assert len(b.runs.list_runs()) == 1  # not before its delay
        b.clock.set("2000-01-02 00:15:00")
        b.send("wake")
        b.settle(lambda: finished(b, "a", 1))
        b.jobs.rerun("a", P("2000-01-01 00:00:00"), P("2000-01-01 01:00:00"))
        b.settle(lambda: len(b.jobs.history("a")) == 3 and finished(b, "a", 1))
        history = b.jobs.history("a")
    assert [(a.attempt, a.status) for a in history] == [
        (3, AttemptStatus.SUCCEEDED), (2, AttemptStatus.SUCCEEDED), (1, AttemptStatus.FAILED),
    ]  # fmt: skip


def test_recover_records_a_run_that_ended_unwatched_and_launches_one_never_sent(
    tmp_path: Path,
) -> None:
    from scheduler.batch.engine import run_id_of
    from scheduler.batch.state import start
    from scheduler.batch.store import Attempt
    from scheduler.programs.model import Run, StartedBy

    job = seed_job("a", command=TRUE, end_partition="2000-01-01 02:00:00", max_parallelism=0)
    with batch_engine(tmp_path) as b:
        b.load(seed_config(job))
        config = b.settle(lambda: b.jobs.configuration())
        a = config.job("a")
        first, second = hours(0, 2)
        # As a worker that died left it: both RUNNING, the first's run ended, the second's
        # launch never made durable.
        state = start(start(b.states()["a"], a, first, 1), a, second, 1)
        b.runtime.store.save_states({"a": state})
        for partition in (first, second):
            b.runtime.store.record_attempt(
                Attempt("a", partition, 1, run_id_of(a, partition, 1), AttemptStatus.RUNNING, 1)
            )
        b.runs.create(
            Run(run_id_of(a, first, 1), "batch-command", StartedBy(StarterKind.BATCH_JOB, "a"),
                {}, RunStatus.COMPLETED, 1, 1, 1, 2)
        )  # fmt: skip
        b.send("recover")
        b.settle(lambda: finished(b, "a", 2))
        runs = b.runs.list_runs()
    assert sorted(r.run_id for r in runs) == sorted(run_id_of(a, p, 1) for p in (first, second))


def test_partitions_start_when_their_time_comes_from_wake_tasks_alone(tmp_path: Path) -> None:
    from scheduler.batch.durations import format_partition
    from scheduler.engine.clock import now_ms

    begin = now_ms() // 1000 * 1000 + 3000
    job = seed_job(
        "a",
        command=TRUE,
        increment="1 seconds",
        start_partition=format_partition(begin),
        end_partition=format_partition(begin + 3000),
    )
    with batch_engine(tmp_path, wall_clock=True) as b:
        b.load(seed_config(job))
        assert b.settle(lambda: b.jobs.configuration())
        assert b.runs.list_runs() == []  # nothing is due yet
        b.settle(lambda: finished(b, "a", 3), timeout=30)
        runs = b.runs.list_runs()
    # Partition P starts once P + 1 s has come, never before.
    for run in runs:
        partition = int(run.arguments["_partition"])
        assert (run.started_ms or 0) >= partition + 1000


def test_a_job_removed_by_a_reload_keeps_its_run_and_its_state_goes_when_the_run_ends(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "go"
    wait = [PY, "-c", f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)"]
    kept = seed_job("kept", command=TRUE, end_partition="2000-01-01 01:00:00")
    gone = seed_job("gone", command=wait, end_partition="2000-01-01 01:00:00")
    with batch_engine(tmp_path) as b:
        b.load(seed_config(kept, gone))
        # The engine is busy while `gone` runs: wait on the store, not for idle.
        assert wait_for(lambda: b.states().get("gone") and b.states()["gone"].running)
        b.load(seed_config(kept))
        assert wait_for(lambda: len(b.jobs.configuration().jobs) == 1)  # type: ignore[union-attr]
        assert "gone" in b.states()  # its run goes on, and counts
        gate.touch()
        b.settle(lambda: "gone" not in b.states())
        runs = b.runs.list_runs()
    assert {(r.started_by.name, r.status) for r in runs} == {
        ("kept", RunStatus.COMPLETED),
        ("gone", RunStatus.COMPLETED),
    }


def test_a_wake_applies_retention_to_the_history_and_the_gauges_count_partitions(
    tmp_path: Path,
) -> None:
    from scheduler import metrics

    job = seed_job("a", command=TRUE, end_partition="2000-01-01 06:00:00", retention="2 hours")
    with batch_engine(tmp_path) as b:
        b.load(seed_config(job))
        b.settle(lambda: finished(b, "a", 6))
        assert len(b.jobs.history("a")) == 6
        b.send("wake")
        b.engine.join(include_future=False)
        kept = [a.partition for a in b.jobs.history("a")]
        views = b.jobs.partitions("a")
    # The newest due partition is 05:00: retention keeps the history from 03:00 on.
    assert kept == hours(3, 6)[::-1]
    assert {v.status for v in views} == {Status.SUCCEEDED}  # successes outlive their history
    assert metrics.BATCH_PARTITIONS.labels("a", "succeeded")._value.get() == 6
    assert metrics.BATCH_PARTITIONS.labels("a", "running")._value.get() == 0
    assert metrics.BATCH_OLDEST_PENDING.labels("a")._value.get() == 0


def test_operator_changes_sent_within_one_millisecond_run_in_the_order_they_were_sent(
    tmp_path: Path,
) -> None:
    # Tasks due in one millisecond run in key order, so a random key could run a `decide`
    # sent after a `pause` before it.
    sent: list[Task] = []

    class Recording:
        def schedule_task(self, task: Task) -> Future[None]:
            sent.append(task)
            done: Future[None] = Future()
            done.set_result(None)
            return done

    text = json.dumps(seed_config(seed_job("a")))
    jobs = BatchJobs(store=SqliteBatchStore(path=str(tmp_path / "b.db")), client=Recording())  # type: ignore[arg-type]
    for _ in range(200):
        jobs.load(text)
    in_run_order = sorted(sent, key=lambda t: t.key)
    assert [t.key for t in in_run_order] == [t.key for t in sent]


def test_a_file_applied_between_the_store_read_and_the_file_read_is_read_from_the_store(
    tmp_path: Path,
) -> None:
    # An API beside a fleet read the store (nothing yet), then a worker stored the file and
    # renamed it, then the API found no file: it answered "no batch configuration is loaded"
    # (a CI failure of tests/api/test_batch_beside_fleet.py on Kafka + Cassandra).
    text = json.dumps(seed_config(seed_job("a")))
    file = tmp_path / "jobs.json"
    file.write_text(text)
    store = SqliteBatchStore(path=str(tmp_path / "b.db"))
    store.open()
    real_read = store.configuration

    def applied_meanwhile(name: str = "default") -> StoredConfiguration | None:
        if file.exists():  # the worker stores it and renames the file right after this read
            found = real_read(name)
            store.save_configuration(StoredConfiguration(text, 1, source=str(file)), name)
            file.rename(tmp_path / "jobs.json_IMPORTED")
            return found
        return real_read(name)

    store.configuration = applied_meanwhile  # type: ignore[method-assign]
    jobs = BatchJobs(store=store, file=file)
    stored = jobs.stored()
    assert stored is not None and stored.text == text and stored.source == str(file)
    store.close()
