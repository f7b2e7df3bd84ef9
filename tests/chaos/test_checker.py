"""The chaos checker's verdict on hand-made histories: each must-be-zero count is found."""

from __future__ import annotations

from scheduler.chaos.checker import Fault, check, longest_pauses
from scheduler.fleet import Execution


def run(
    key: tuple[str, int, str],
    start: int,
    end: int | None,
    *,
    worker: int = 1,
    attempt: int = 1,
    ok: bool = True,
    partition: int = 0,
) -> Execution:
    return Execution(
        key[0], key[1], key[2], attempt, worker, partition, start, end, ok and end is not None
    )


A1 = ("a", 1000, "1")
A2 = ("a", 2000, "2")
B1 = ("b", 1000, "1")


def test_a_clean_history_is_ok_and_counts_what_was_sent_and_acknowledged() -> None:
    report = check(
        "clean",
        sent=[A1, A2, B1],
        acknowledged=[A1, A2],
        executions=[run(A1, 1000, 1010), run(A2, 2000, 2010), run(B1, 1000, 1005)],
        faults=[],
    )
    assert report.ok, report.render()
    assert (report.sent, report.acknowledged, report.indeterminate) == (3, 2, 1)
    assert "verdict               OK" in report.render()


def test_an_acknowledged_task_that_never_ran_is_lost() -> None:
    report = check(
        "lost", sent=[A1, A2], acknowledged=[A1, A2], executions=[run(A1, 1, 2)], faults=[]
    )
    assert report.lost == [A2]
    assert not report.ok


def test_a_run_of_a_task_nobody_sent_is_an_unacknowledged_run() -> None:
    report = check(
        "ghost", sent=[A1], acknowledged=[A1], executions=[run(A1, 1, 2), run(B1, 3, 4)], faults=[]
    )
    assert report.unacknowledged_runs == [B1]
    assert not report.ok


def test_two_attempts_of_one_ordering_id_at_once_are_an_overlap() -> None:
    report = check(
        "overlap",
        sent=[A1, A2],
        acknowledged=[A1, A2],
        executions=[run(A1, 1000, 1500, worker=1), run(A2, 1200, 1300, worker=2)],
        faults=[],
    )
    assert len(report.overlaps) == 1
    assert not report.ok


def test_an_unfinished_attempt_on_a_worker_that_went_on_working_counts_as_an_overlap() -> None:
    # Worker 1 never recorded A1's end yet ran B1 later: it was alive, so A1 may have run on.
    report = check(
        "zombie",
        sent=[A1, A2, B1],
        acknowledged=[A1, A2, B1],
        executions=[
            run(A1, 1000, None, worker=1),
            run(A1, 1100, 1200, worker=2, attempt=2),
            run(A2, 2000, 2100, worker=2),
            run(B1, 3000, 3100, worker=1),
        ],
        faults=[],
    )
    assert [(a.worker, b.worker) for a, b in report.overlaps] == [(1, 2)]


def test_a_worker_killed_mid_attempt_leaves_no_overlap() -> None:
    report = check(
        "killed",
        sent=[A1],
        acknowledged=[A1],
        executions=[run(A1, 1000, None, worker=1), run(A1, 1100, 1200, worker=2, attempt=2)],
        faults=[],
    )
    assert report.ok, report.render()


def test_a_killed_worker_that_started_other_attempts_before_dying_leaves_no_overlap() -> None:
    # Worker 1 started A1, then B1 (its pool runs several at once), and died; worker 2 ran A1
    # again after the session timeout.
    report = check(
        "killed busy",
        sent=[A1, B1],
        acknowledged=[A1, B1],
        executions=[
            run(A1, 1000, None, worker=1),
            run(B1, 1200, 1300, worker=1),
            run(A1, 12_000, 12_100, worker=2, attempt=2),
        ],
        faults=[],
    )
    assert report.overlaps == []


def test_tasks_of_one_ordering_id_run_out_of_key_order_are_an_order_violation() -> None:
    report = check(
        "order",
        sent=[A1, A2],
        acknowledged=[A1, A2],
        executions=[run(A2, 10, 20), run(A1, 30, 40)],
        faults=[],
    )
    assert report.order_violations == [(A2, A1)]


def test_a_duplicate_near_a_fault_is_explained_and_one_far_from_any_is_not() -> None:
    executions = [run(A1, 1000, 1100), run(A1, 5000, 5100, worker=2), run(B1, 100_000, 100_100)]
    executions.append(run(B1, 200_000, 200_100, worker=2))
    report = check(
        "dups",
        sent=[A1, B1],
        acknowledged=[A1, B1],
        executions=executions,
        faults=[Fault("kill -9 w1", 1050, 2000)],
    )
    assert report.duplicates == {A1: "in flight at kill -9 w1", B1: "unexplained"}
    assert report.unexplained == [B1]
    assert not report.ok


def test_the_longest_pause_of_each_partition_is_the_largest_gap_between_starts() -> None:
    executions = [
        run(A1, 0, 1, partition=0),
        run(A2, 700, 701, partition=0),
        run(B1, 50, 51, partition=1),
    ]
    executions.append(run(("c", 1, "1"), 900, 901, partition=0))
    assert longest_pauses(executions) == {0: 700, 1: 0}
    assert longest_pauses(executions, (0, 800)) == {0: 700, 1: 0}
    assert longest_pauses(executions, (100, 1000)) == {0: 200}


def test_an_attempt_frozen_mid_run_overlapping_the_next_owner_is_explained_not_failed() -> None:
    # Worker 1 is SIGSTOPped at 1100 while it runs A1 (it ends at 16_000, after SIGCONT);
    # worker 2 took the partition and ran A2 and A3 meanwhile. Worker 2's A3 also began while
    # its own A2 ran: that overlap has nothing to do with the freeze, and fails the verdict.
    a3 = ("a", 3000, "3")
    report = check(
        "worker-pause",
        sent=[A1, A2, a3],
        acknowledged=[A1, A2, a3],
        executions=[
            run(A1, 1000, 16_000, worker=1),
            run(A2, 12_000, 12_300, worker=2),
            run(a3, 12_200, 12_400, worker=2),
        ],
        faults=[Fault("SIGSTOP w1", 1100, 16_000, frozen_worker=1)],
    )
    assert [(a.key, b.key, why) for a, b, why in report.explained_overlaps] == [
        (A1, A2, "in flight at SIGSTOP w1"),
        (A1, a3, "in flight at SIGSTOP w1"),
    ]
    assert [(a.key, b.key) for a, b in report.overlaps] == [(A2, a3)]
    assert not report.ok
    assert "overlaps              3; in flight at SIGSTOP w1 2; unexplained 1" in report.render()


def test_only_overlaps_of_attempts_in_flight_at_the_freeze_are_explained() -> None:
    # A1 was in flight on worker 1 at the SIGSTOP: its overlap with worker 2's A2 is the
    # window. B1 began on worker 1 after the SIGCONT, while worker 2 ran B2: a real overlap.
    b2 = ("b", 2000, "2")
    report = check(
        "worker-pause",
        sent=[A1, A2, B1, b2],
        acknowledged=[A1, A2, B1, b2],
        executions=[
            run(A1, 1000, 16_000, worker=1),
            run(A2, 12_000, 12_300, worker=2),
            run(b2, 15_900, 16_400, worker=2),
            run(B1, 16_100, 16_200, worker=1),
        ],
        faults=[Fault("SIGSTOP w1", 1100, 16_000, frozen_worker=1)],
    )
    assert [(a.key, b.key) for a, b, _ in report.explained_overlaps] == [(A1, A2)]
    assert [(a.key, b.key) for a, b in report.overlaps] == [(b2, B1)]
    assert not report.ok


def test_a_worker_pause_whose_only_overlaps_are_frozen_attempts_is_ok() -> None:
    # A1 frozen mid-run and never ended (the run stopped the worker first), B1 frozen and
    # finished after SIGCONT: both overlap later runs on worker 2, both are the window.
    b3, c1 = ("b", 3000, "3"), ("c", 1000, "1")
    report = check(
        "worker-pause",
        sent=[A1, A2, B1, b3, c1],
        acknowledged=[A1, A2, B1, b3, c1],
        executions=[
            run(A1, 1000, None, worker=1),
            run(B1, 1050, 16_050, worker=1),
            run(A1, 11_900, 12_000, worker=2, attempt=2),
            run(A2, 12_000, 12_300, worker=2),
            run(b3, 13_000, 13_100, worker=2),
            run(c1, 16_100, 16_200, worker=1),
        ],
        faults=[Fault("SIGSTOP w1", 1100, 16_000, frozen_worker=1)],
    )
    assert report.overlaps == []
    assert len(report.explained_overlaps) == 3
    assert report.ok, report.render()
    assert "verdict               OK" in report.render()


def test_an_attempt_frozen_mid_run_that_already_overlapped_before_the_freeze_fails() -> None:
    # Worker 2 began A2 at 1050, before the freeze at 1100, while worker 1's A1 ran: two
    # owners at once before anything was frozen.
    report = check(
        "worker-pause",
        sent=[A1, A2],
        acknowledged=[A1, A2],
        executions=[run(A1, 1000, 16_000, worker=1), run(A2, 1050, 1300, worker=2)],
        faults=[Fault("SIGSTOP w1", 1100, 16_000, frozen_worker=1)],
    )
    assert report.explained_overlaps == []
    assert [(a.key, b.key) for a, b in report.overlaps] == [(A1, A2)]
    assert not report.ok


def test_a_fault_that_freezes_no_worker_explains_no_overlap() -> None:
    report = check(
        "broker-pause",
        sent=[A1, A2],
        acknowledged=[A1, A2],
        executions=[run(A1, 1000, 16_000, worker=1), run(A2, 12_000, 12_300, worker=2)],
        faults=[Fault("SIGSTOP cluster-kafka-1", 1100, 16_000)],
    )
    assert report.explained_overlaps == []
    assert len(report.overlaps) == 1
    assert not report.ok
