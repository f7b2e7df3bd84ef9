"""The BatchStore contract, run against SQLite and Cassandra (see the `batch_store` fixture)."""

from __future__ import annotations

import json

from scheduler.batch import finish, new_state, parse_configuration, start
from scheduler.batch.store import (
    Attempt,
    AttemptStatus,
    BatchStore,
    Changes,
    StoredConfiguration,
)
from tests.batch.helpers import P, seed_config, seed_job

CONFIG = parse_configuration(json.dumps(seed_config(seed_job("a"), seed_job("b"))))
A, B = CONFIG.job("a"), CONFIG.job("b")


def an_attempt(partition: str, attempt: int = 1, **kw: object) -> Attempt:
    fields: dict[str, object] = {
        "job": "a",
        "partition": P(partition),
        "attempt": attempt,
        "run_id": f"run-{partition}-{attempt}",
        "status": AttemptStatus.RUNNING,
        "started_ms": 1000 * attempt,
    }
    fields.update(kw)
    return Attempt(**fields)  # type: ignore[arg-type]


def test_a_store_without_a_load_has_no_configuration_and_no_states(batch_store: BatchStore) -> None:
    assert batch_store.configuration() is None
    assert batch_store.states() == {}


def test_the_last_saved_configuration_is_the_one_in_force(batch_store: BatchStore) -> None:
    first = StoredConfiguration("{}", 1, frozenset(), None, "a.json")
    second = StoredConfiguration('{"x": 1}', 2, frozenset({"b"}), 5000, "api")
    batch_store.save_configuration(first)
    batch_store.save_configuration(second)
    assert batch_store.configuration() == second
    assert batch_store.configuration("other") is None


def test_states_read_back_as_written_and_others_stay(batch_store: BatchStore) -> None:
    a = start(new_state(A), A, P("2000-01-01 00:00:00"), 10)
    a, _ = finish(a, P("2000-01-01 00:00:00"), True, 20)
    a = start(a, A, P("2000-01-01 01:00:00"), 30)
    b = new_state(B)
    batch_store.save_states({"a": a, "b": b})
    assert batch_store.states() == {"a": a, "b": b}
    a2, _ = finish(a, P("2000-01-01 01:00:00"), False, 40, "exit 1")
    batch_store.save_states({"a": a2})
    assert batch_store.states() == {"a": a2, "b": b}


def test_a_removed_job_state_is_deleted(batch_store: BatchStore) -> None:
    batch_store.save_states({"a": new_state(A), "b": new_state(B)})
    batch_store.save_states({}, removed=["b"])
    assert list(batch_store.states()) == ["a"]


def test_configuration_names_do_not_see_each_other(batch_store: BatchStore) -> None:
    batch_store.save_states({"a": new_state(A)}, "one")
    batch_store.record_attempt(an_attempt("2000-01-01 00:00:00"), "one")
    assert batch_store.states("two") == {}
    assert batch_store.attempts("a", "two") == []


def test_an_attempt_is_replaced_by_its_end(batch_store: BatchStore) -> None:
    running = an_attempt("2000-01-01 00:00:00")
    batch_store.record_attempt(running)
    ended = an_attempt(
        "2000-01-01 00:00:00", status=AttemptStatus.MARKED_SUCCESS, ended_ms=5, reason="exit 3"
    )
    batch_store.record_attempt(ended)
    assert batch_store.attempts("a") == [ended]


def test_attempts_list_newest_partition_then_newest_attempt_first(batch_store: BatchStore) -> None:
    made = [
        an_attempt("2000-01-01 00:00:00", 1),
        an_attempt("2000-01-01 01:00:00", 1),
        an_attempt("2000-01-01 01:00:00", 2),
        an_attempt("2000-01-01 02:00:00", 1),
    ]
    for attempt in made:
        batch_store.record_attempt(attempt)
    assert batch_store.attempts("a") == [made[3], made[2], made[1], made[0]]
    assert batch_store.attempts("a", limit=2) == [made[3], made[2]]
    assert batch_store.attempts("a", partition=P("2000-01-01 01:00:00")) == [made[2], made[1]]
    between = batch_store.attempts(
        "a", first_ms=P("2000-01-01 01:00:00"), stop_ms=P("2000-01-01 02:00:00")
    )
    assert between == [made[2], made[1]]
    assert batch_store.attempts("b") == []


def test_retention_deletes_only_attempts_before_the_cutoff(batch_store: BatchStore) -> None:
    for hour in ("00", "01", "02"):
        batch_store.record_attempt(an_attempt(f"2000-01-01 {hour}:00:00"))
    batch_store.delete_attempts_before("a", P("2000-01-01 01:00:00"))
    kept = [a.partition for a in batch_store.attempts("a")]
    assert kept == [P("2000-01-01 02:00:00"), P("2000-01-01 01:00:00")]


def test_deleting_a_job_deletes_its_state_and_history_only(batch_store: BatchStore) -> None:
    batch_store.save_states({"a": new_state(A), "b": new_state(B)})
    batch_store.record_attempt(an_attempt("2000-01-01 00:00:00"))
    batch_store.record_attempt(an_attempt("2000-01-01 00:00:00", job="b"))
    batch_store.delete_job("a")
    assert list(batch_store.states()) == ["b"]
    assert batch_store.attempts("a") == []
    assert len(batch_store.attempts("b")) == 1


def test_one_write_stores_a_tasks_attempts_states_and_configuration_and_read_returns_them(
    batch_store: BatchStore,
) -> None:
    batch_store.save_states({"a": new_state(A), "b": new_state(B)})
    record = StoredConfiguration("{}", 7, frozenset({"a"}), 9000, "jobs.json")
    a = start(new_state(A), A, P("2000-01-01 00:00:00"), 10)
    ended = an_attempt("2000-01-01 00:00:00", status=AttemptStatus.SUCCEEDED, ended_ms=20)
    later = an_attempt("2000-01-01 01:00:00")
    batch_store.write(Changes({"a": a}, frozenset({"b"}), [ended, later], record))
    assert batch_store.read() == (record, {"a": a})
    assert batch_store.attempts("a") == [later, ended]
    assert batch_store.read("other") == (None, {})


def test_a_write_without_a_configuration_keeps_the_one_in_force(batch_store: BatchStore) -> None:
    record = StoredConfiguration("{}", 7, frozenset(), None, "api")
    batch_store.save_configuration(record)
    batch_store.write(Changes({"a": new_state(A)}))
    assert batch_store.read() == (record, {"a": new_state(A)})


def test_a_write_of_every_state_of_a_large_configuration_stores_them_all(
    batch_store: BatchStore,
) -> None:
    # More states than fit one batch of the Cassandra adapter: a reload changes all of them.
    config = parse_configuration(
        json.dumps(seed_config(*(seed_job(f"job{i}") for i in range(200))))
    )
    states = {job.name: start(new_state(job), job, job.start, 5) for job in config.jobs}
    batch_store.write(Changes(states))
    assert batch_store.states() == states


def test_the_last_attempts_are_the_highest_recorded_of_each_partition_asked_for(
    batch_store: BatchStore,
) -> None:
    for made in (
        an_attempt("2000-01-01 00:00:00", 1),
        an_attempt("2000-01-01 00:00:00", 3),
        an_attempt("2000-01-01 00:00:00", 2),
        an_attempt("2000-01-01 01:00:00", 1),
        an_attempt("2000-01-01 02:00:00", 1, job="b"),
        an_attempt("2000-01-01 03:00:00", 4),
    ):
        batch_store.record_attempt(made)
    wanted = {
        "a": [P("2000-01-01 00:00:00"), P("2000-01-01 01:00:00"), P("2000-01-01 02:00:00")],
        "b": [P("2000-01-01 02:00:00")],
        "c": [P("2000-01-01 00:00:00")],
    }
    assert batch_store.last_attempts(wanted) == {
        ("a", P("2000-01-01 00:00:00")): 3,
        ("a", P("2000-01-01 01:00:00")): 1,
        ("b", P("2000-01-01 02:00:00")): 1,
    }
    assert batch_store.last_attempts(wanted, "other") == {}
    assert batch_store.last_attempts({}) == {}
