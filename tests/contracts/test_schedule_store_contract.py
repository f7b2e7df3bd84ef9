"""The ScheduleStore contract, run against SQLite and Cassandra (see the `schedule_store`
fixture)."""

from __future__ import annotations

import json
from dataclasses import astuple

from scheduler.schedules import (
    Partition,
    PartitionsAdded,
    ProgramStatus,
    RunStatus,
    Schedule,
    Time,
    add_event,
    new_job,
)
from scheduler.schedules.abc import (
    FireRow,
    ListedSchedule,
    ScheduleRecord,
    ScheduleStore,
    stored_json,
)


def cron(name: str) -> Schedule:
    return Schedule(name=name, program="clean", trigger=Time(cron="5 * * * *"))


def on_data(name: str, dataset: str = "clicks") -> Schedule:
    return Schedule(
        name=name, program="rollup", trigger=Partition(dataset=dataset, num_partitions=2)
    )


def on_program(name: str, program: str = "rollup") -> Schedule:
    return Schedule(
        name=name,
        program="report",
        trigger=ProgramStatus(program=program, statuses=frozenset({RunStatus.COMPLETED})),
    )


def test_a_schedule_reads_back_with_its_state(schedule_store: ScheduleStore) -> None:
    record = ScheduleRecord(
        cron("hourly"),
        revision=7,
        enabled=True,
        created_ms=1,
        updated_ms=2,
        change_id="c1",
        last_fires={"0": 100},
        next_fires={"0": 200},
    )
    schedule_store.put(record)
    assert schedule_store.get("hourly") == record
    assert schedule_store.get("other") is None


def test_lists_page_by_name_and_filter_by_trigger_type_and_status(
    schedule_store: ScheduleStore,
) -> None:
    for i in range(5):
        schedule_store.put(ScheduleRecord(cron(f"c{i}"), 1, enabled=i % 2 == 0))
    schedule_store.put(ScheduleRecord(on_data("d0"), 1, enabled=True))
    names = lambda records: [r.name for r in records]  # noqa: E731
    assert names(schedule_store.list_schedules(limit=3)) == ["c0", "c1", "c2"]
    assert names(schedule_store.list_schedules(after="c2", limit=3)) == ["c3", "c4", "d0"]
    assert names(schedule_store.list_schedules(status="ENABLED")) == ["c0", "c2", "c4", "d0"]
    assert names(schedule_store.list_schedules(trigger_type="PARTITION")) == ["d0"]
    assert names(schedule_store.list_schedules(trigger_type="TIME", status="DISABLED")) == [
        "c1",
        "c3",
    ]


def test_a_walk_by_pages_shows_every_matching_schedule_once_in_name_order(
    schedule_store: ScheduleStore,
) -> None:
    """Schedules of three trigger types, enabled and disabled, their names interleaved across
    the store's per-kind indexes; one moved from disabled to enabled after it was written:
    walked a page at a time with `after`, unfiltered and filtered, both listing forms show each
    matching schedule once, in name order, and end with a short or empty page."""
    makers = (cron, on_data, on_program)
    enabled = {}
    for i in range(17):
        name = f"s{i:02}"
        enabled[name] = i % 3 == 0
        schedule_store.put(ScheduleRecord(makers[i % 3](name), 1, enabled=enabled[name]))
    schedule_store.put(ScheduleRecord(on_data("s04"), 2, enabled=True))  # was disabled
    enabled["s04"] = True
    kinds = {f"s{i:02}": ("TIME", "PARTITION", "PROGRAM_STATUS")[i % 3] for i in range(17)}

    def walk(limit: int, **filters: str) -> list[list[str]]:
        pages: list[list[str]] = []
        after = ""
        while True:
            page = schedule_store.list_listed(after=after, limit=limit, **filters)  # type: ignore[arg-type]
            assert [r.name for r in page] == [
                r.name
                for r in schedule_store.list_schedules(after=after, limit=limit, **filters)  # type: ignore[arg-type]
            ]
            pages.append([record.name for record in page])
            if len(page) < limit:
                return pages
            after = page[-1].name

    for limit in (1, 4, 17, 100):
        pages = walk(limit)
        assert [name for page in pages for name in page] == sorted(enabled)
        assert all(len(page) == limit for page in pages[:-1]) and len(pages[-1]) < limit
    on = walk(2, status="ENABLED")
    assert [name for page in on for name in page] == sorted(n for n, e in enabled.items() if e)
    data = walk(3, trigger_type="PARTITION", status="DISABLED")
    assert [name for page in data for name in page] == sorted(
        n for n, e in enabled.items() if kinds[n] == "PARTITION" and not e
    )
    assert schedule_store.list_listed(after="s16") == []
    assert schedule_store.list_listed(trigger_type="AND") == []


def test_the_listed_form_is_the_decoded_records_to_the_key_order_without_decoding(
    schedule_store: ScheduleStore,
) -> None:
    nightly = Schedule(
        name="nightly",
        description="at night",
        program="clean",
        properties={"b": "2", "a": "1"},
        trigger=Time(cron="5 2 * * *"),
        time_zone="Europe/Paris",
    )
    records = [
        ScheduleRecord(nightly, 3, enabled=True, created_ms=5, next_fires={"0": 9_000}),
        ScheduleRecord(on_data("d0"), 1, disabled_ms=7, source="apply:x"),
        ScheduleRecord(on_program("p0"), 2, enabled=True),
    ]
    for record in records:
        schedule_store.put(record)
    for status in (None, "ENABLED", "DISABLED"):
        decoded = schedule_store.list_schedules(status=status)
        listed = schedule_store.list_listed(status=status)
        assert [astuple(one) for one in listed] == [
            astuple(ListedSchedule.of(record)) for record in decoded
        ]
        # The same JSON text, key order included, as the API shows it.
        assert [json.dumps(one.schedule) for one in listed] == [
            json.dumps(record.schedule.to_json()) for record in decoded
        ]
    assert [one.name for one in schedule_store.list_listed(after="d0", limit=1)] == ["nightly"]
    assert [one.name for one in schedule_store.list_listed(trigger_type="PARTITION")] == ["d0"]


def test_a_record_stored_without_its_listed_text_is_listed_by_decoding_it() -> None:
    record = ScheduleRecord(on_program("p0"), 2, enabled=True, next_fires={"0": 1})
    old = record.to_json()  # as records were stored before the text beside them
    assert ListedSchedule.from_stored(old) == ListedSchedule.of(record)
    assert ListedSchedule.from_stored(json.loads(json.dumps(stored_json(record)))) == (
        ListedSchedule.of(record)
    )


def test_a_status_change_moves_the_schedule_between_filters(
    schedule_store: ScheduleStore,
) -> None:
    schedule_store.put(ScheduleRecord(cron("c"), 1))
    schedule_store.put(ScheduleRecord(cron("c"), 1, enabled=True))
    assert schedule_store.list_schedules(status="DISABLED") == []
    assert [r.name for r in schedule_store.list_schedules(status="ENABLED")] == ["c"]


def test_a_trigger_type_change_moves_the_schedule_between_filters(
    schedule_store: ScheduleStore,
) -> None:
    schedule_store.put(ScheduleRecord(cron("s"), 1, enabled=True))
    schedule_store.put(ScheduleRecord(on_data("s"), 2, enabled=True))
    assert schedule_store.list_schedules(trigger_type="TIME") == []
    assert [r.name for r in schedule_store.list_schedules(trigger_type="PARTITION")] == ["s"]
    assert [r.name for r in schedule_store.list_schedules(status="ENABLED")] == ["s"]


def test_the_reverse_index_follows_the_trigger(schedule_store: ScheduleStore) -> None:
    schedule_store.put(ScheduleRecord(on_data("a", "clicks"), 1))
    schedule_store.put(ScheduleRecord(on_data("b", "clicks"), 1))
    schedule_store.put(ScheduleRecord(on_program("r", "rollup"), 1))
    assert schedule_store.names_for_key("dataset:clicks") == ["a", "b"]
    assert schedule_store.names_for_key("program:rollup") == ["r"]
    schedule_store.put(ScheduleRecord(on_data("b", "views"), 2))
    assert schedule_store.names_for_key("dataset:clicks") == ["a"]
    assert schedule_store.names_for_key("dataset:views") == ["b"]


def test_extra_keys_survive_a_put_and_leave_on_remove(schedule_store: ScheduleStore) -> None:
    schedule_store.put(ScheduleRecord(on_data("a"), 1))
    schedule_store.add_key("run-end:rollup", "a")
    schedule_store.put(ScheduleRecord(on_data("a"), 1, enabled=True))
    assert schedule_store.names_for_key("run-end:rollup") == ["a"]
    schedule_store.remove_key("run-end:rollup", "a")
    schedule_store.remove_key("run-end:rollup", "a")
    assert schedule_store.names_for_key("run-end:rollup") == []


def test_jobs_are_listed_oldest_first_and_deleted_one_by_one(
    schedule_store: ScheduleStore,
) -> None:
    schedule = on_data("a")
    schedule_store.put(ScheduleRecord(schedule, 3))
    event = PartitionsAdded(dataset="clicks", count=1, event_id="e1")
    jobs = [add_event(new_job(schedule, rev, gen), event, 10)[0] for rev, gen in ((3, 1), (2, 9))]
    for job in jobs:
        schedule_store.put_job(job)
    schedule_store.put_job(jobs[0])
    assert schedule_store.jobs("a") == [jobs[1], jobs[0]]
    schedule_store.delete_job("a", jobs[1].key)
    assert schedule_store.jobs("a") == [jobs[0]]


def test_deleting_a_schedule_removes_its_rows(schedule_store: ScheduleStore) -> None:
    schedule = on_data("a")
    schedule_store.put(ScheduleRecord(schedule, 1))
    schedule_store.put_job(new_job(schedule, 1))
    schedule_store.delete("a")
    schedule_store.delete("a")
    assert schedule_store.get("a") is None
    assert schedule_store.jobs("a") == []
    assert schedule_store.names_for_key("dataset:clicks") == []
    assert schedule_store.list_schedules() == []


def test_fire_index_rows_read_back_by_instant_and_shard_and_leave_together(
    schedule_store: ScheduleStore,
) -> None:
    rows = [
        FireRow(1_000, 2, "b", 0, 7),
        FireRow(1_000, 2, "a", 1, 7),
        FireRow(1_000, 2, "a", 0, 7),
        FireRow(1_000, 3, "c", 0, 7),
        FireRow(2_000, 2, "d", 0, 7),
    ]
    schedule_store.put_fires(rows)
    schedule_store.put_fires([FireRow(1_000, 2, "b", 0, 8)])  # written again: one row, updated
    assert schedule_store.fires(1_000, 2) == [
        FireRow(1_000, 2, "a", 0, 7),
        FireRow(1_000, 2, "a", 1, 7),
        FireRow(1_000, 2, "b", 0, 8),
    ]
    schedule_store.delete_fires(1_000, 2)
    assert schedule_store.fires(1_000, 2) == []
    assert schedule_store.fires(1_000, 3) == [FireRow(1_000, 3, "c", 0, 7)]
    assert schedule_store.fires(2_000, 2) == [FireRow(2_000, 2, "d", 0, 7)]


def test_a_record_is_replaced_only_if_unchanged_since_it_was_read(
    schedule_store: ScheduleStore,
) -> None:
    for name in ("kept", "raced"):
        schedule_store.put(ScheduleRecord(cron(name), 1, enabled=True, next_fires={"0": 100}))
    read = schedule_store.get_versioned(["kept", "raced", "missing"])
    assert sorted(read) == ["kept", "raced"]
    assert read["kept"][0] == schedule_store.get("kept")
    disabled = ScheduleRecord(cron("raced"), 1, enabled=False)
    schedule_store.put(disabled)  # the schedule's own queue wins the race
    advanced = {
        name: record.changed(last_fires={"0": 100}, next_fires={"0": 200})
        for name, (record, _) in read.items()
    }
    written = schedule_store.replace_many(
        [(text, advanced[name]) for name, (_, text) in read.items()]
    )
    assert written == {"kept"}
    assert schedule_store.get("kept") == advanced["kept"]
    assert schedule_store.get("raced") == disabled
    assert [s.name for s in schedule_store.list_schedules(status="ENABLED")] == ["kept"]


def test_jobs_are_written_and_deleted_in_one_batch(schedule_store: ScheduleStore) -> None:
    first, second = new_job(cron("hourly"), 1, 0), new_job(cron("hourly"), 1, 1)
    schedule_store.put_job(first)
    schedule_store.put_jobs([second], delete=[("hourly", first.key)])
    assert schedule_store.jobs("hourly") == [second]


def test_jobs_before_a_key_are_deleted_at_once_by_revision_then_generation(
    schedule_store: ScheduleStore,
) -> None:
    """Generation 10 sorts after 9 (not as text), revision before generation; other schedules'
    jobs stay."""
    hourly = cron("hourly")
    jobs = [new_job(hourly, 1, 9), new_job(hourly, 1, 10), new_job(hourly, 2, 0)]
    jobs += [new_job(hourly, 2, 1), new_job(hourly, 2, 11)]
    other = new_job(cron("daily"), 1, 0)
    schedule_store.put_jobs([*jobs, other])
    newest = new_job(hourly, 3, 0)
    schedule_store.put_jobs(
        [newest], delete=[("hourly", jobs[4].key)], below=[("hourly", jobs[3].key)]
    )
    assert schedule_store.jobs("hourly") == [jobs[3], newest]
    assert schedule_store.jobs("daily") == [other]


def test_the_jobs_of_many_schedules_read_back_as_each_ones_jobs_oldest_first(
    schedule_store: ScheduleStore,
) -> None:
    hourly, daily = cron("hourly"), cron("daily")
    jobs = [new_job(hourly, 2, 0), new_job(hourly, 1, 4), new_job(daily, 1, 0)]
    schedule_store.put_jobs(jobs)
    assert schedule_store.jobs_of(["hourly", "none", "daily", "hourly"]) == {
        "hourly": [jobs[1], jobs[0]],
        "none": [],
        "daily": [jobs[2]],
    }
    assert schedule_store.jobs_of([]) == {}
