"""`scheduler bench` at smoke sizes, through the installed console script, as users run it.

Benchmarks are not tests: these only prove that every scenario runs and writes a JSON result
whose numbers are sane (positive rates, p99 >= p50). The measured values are meaningless at
these sizes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = shutil.which("scheduler", path=str(Path(sys.executable).parent)) or "scheduler"
EMBEDDED_SCENARIOS = ("enqueue", "execute", "lag", "backlog")
DISTRIBUTED_SCENARIOS = ("enqueue", "lag", "backlog", "reload", "move")
"""What the distributed `bench all` smoke runs; persist and execute on these backends run in
the settings-file test (`test_the_workers_a_bench_starts_read_its_settings_file`)."""


def servers_env() -> dict[str, str]:
    """The settings that point a bench process at the Kafka broker and Cassandra node the
    tests use."""
    from tests.servers import cassandra_contact, kafka_bootstrap

    hosts, port = cassandra_contact()
    return {
        "SCHEDULER_KAFKA_BOOTSTRAP": kafka_bootstrap(),
        "SCHEDULER_CASSANDRA_HOSTS": ",".join(hosts),
        "SCHEDULER_CASSANDRA_PORT": str(port),
    }


def run_bench(
    out: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float,
    config: Path | None = None,
) -> str:
    """Run `scheduler bench ... --smoke`; with `config`, as `scheduler --config FILE bench` in an
    environment without any SCHEDULER_* variable, so the file alone configures it."""
    base = (
        os.environ
        if config is None
        else {
            name: value for name, value in os.environ.items() if not name.startswith("SCHEDULER_")
        }
    )
    globals_ = ["--config", str(config)] if config is not None else []
    completed = subprocess.run(
        [SCRIPT, *globals_, "--log-level", "WARNING", "bench", *args, "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, **(env or {})},
        cwd=out.parent,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-5000:]
    return completed.stdout


def check_sane(document: dict[str, Any]) -> None:
    """Every rate is positive and every p99 is at least its p50."""
    assert document["rows"], f"{document['scenario']}: no rows; notes: {document['notes']}"
    for row in document["rows"]:
        for name, value in row.items():
            if isinstance(value, float) and math.isnan(value):
                continue
            if name.endswith("_per_s") and value is not None:
                assert value > 0, f"{document['scenario']}: {name}={value} in {row}"
        for prefix in ("", "lag_"):
            p50, p99 = row.get(f"{prefix}p50_ms"), row.get(f"{prefix}p99_ms")
            if p50 is not None and p99 is not None:
                assert p99 >= p50, f"{document['scenario']}: p99 {p99} < p50 {p50} in {row}"


def results(out: Path, scenarios: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    documents = {}
    for name in scenarios:
        path = out / f"{name}.json"
        assert path.is_file(), f"{name}.json was not written"
        documents[name] = json.loads(path.read_text(encoding="utf-8"))
        check_sane(documents[name])
    return documents


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_every_embedded_scenario_writes_sane_json(tmp_path: Path) -> None:
    out = tmp_path / "results"
    # schedules waits for a shared cron fire, api fills a store, jobs starts worker processes:
    # each has a test of its own.
    output = run_bench(out, "all", "--skip", "spark,pipeline,peer,schedules,api,jobs", timeout=220)
    documents = results(out, EMBEDDED_SCENARIOS)
    assert "needs --backends kafka-cassandra; skipped" in output
    assert documents["backlog"]["rows"][0]["rss_peak_mb"] > 0
    plots = tmp_path / "plots"
    run_plot = subprocess.run(
        [SCRIPT, "bench", "plot", "--out", str(out), "--to", str(plots)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run_plot.returncode == 0, run_plot.stderr
    assert {p.name for p in plots.glob("*.png")} >= {"enqueue.png", "execute.png", "lag.png"}


def peer_rows(tmp_path: Path, peers: str, timeout: float) -> dict[str, dict[str, Any]]:
    """`scheduler bench peer --smoke --peers PEERS`: its rows by side, after the sanity checks;
    no side may be skipped or fail (the note would say why)."""
    out = tmp_path / "results"
    run_bench(out, "peer", "--peers", peers, timeout=timeout)
    document = results(out, ("peer",))["peer"]
    assert not [n for n in document["notes"] if " skipped: " in n or " failed: " in n], document[
        "notes"
    ]
    rows = {row["side"]: row for row in document["rows"]}
    for side, row in rows.items():
        assert row["a_tasks_per_s"] > 0 and row["c_enqueue_per_s"] > 0, row
        assert 0 <= row["d_lost"] <= 30 and row["d_twice"] >= 0, (side, row)
    return rows


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_peer_runs_apscheduler_stores_and_this_scheduler_through_all_four_workloads(
    tmp_path: Path,
) -> None:
    rows = peer_rows(tmp_path, "scheduler,apscheduler", timeout=280)
    assert set(rows) == {
        "scheduler embedded",
        "APScheduler 3 memory",
        "APScheduler 3 SQLite",
        "APScheduler 3 PostgreSQL",
    }
    # The kill is real: a memory store forgets what its killed process had not run yet, while
    # this scheduler's log hands every task to the replacement worker.
    assert rows["APScheduler 3 memory"]["d_lost"] > 0
    assert rows["scheduler embedded"]["d_lost"] == 0
    assert rows["scheduler embedded"]["a_x_ours"] == 1


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_peer_runs_celery_eta_tasks_on_a_private_redis(tmp_path: Path) -> None:
    rows = peer_rows(tmp_path, "celery", timeout=220)
    assert list(rows) == ["Celery eta on Redis"]
    assert rows["Celery eta on Redis"]["c_storage_mb"] > 0  # the eta tasks sit in Redis


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_peer_runs_db_scheduler_and_quartz_on_a_private_postgresql(tmp_path: Path) -> None:
    rows = peer_rows(tmp_path, "db-scheduler,quartz", timeout=460)
    assert list(rows) == ["db-scheduler defaults", "db-scheduler tuned", "Quartz JDBC clustered"]
    for row in rows.values():
        assert row["c_storage_mb"] > 0  # the backlog lands in PostgreSQL


def check_jobs(out: Path, backend: str) -> None:
    """The jobs scenario ran its 5 jobs x 48 hours on `backend`, reload and chain included."""
    document = json.loads((out / "jobs.json").read_text(encoding="utf-8"))
    assert not [n for n in document["notes"] if " failed: " in n], document["notes"]
    check_sane(document)
    details = document["details"][backend]
    backlog, steady = details["backlog"], details["steady"]
    assert backlog["drained"] > 0 and backlog["first_launches"] > 0
    assert backlog["running_untouched"] == backlog["running_before_reload"]
    assert steady["runs"] == steady["count"] == 5  # the last hour ran down the chain
    row = document["rows"][0]
    assert row["rss_peak_mb"] > 0 and row["steady_hour_s"] > 0 and row["reload_s"] > 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_jobs_scenario_runs_batch_jobs_on_a_worker_process(tmp_path: Path) -> None:
    out = tmp_path / "results"
    run_bench(out, "jobs", timeout=280)
    check_jobs(out, "embedded")


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.timeout(800)
def test_jobs_scenario_runs_batch_jobs_on_kafka_and_cassandra(tmp_path: Path) -> None:
    env = servers_env()
    out = tmp_path / "results"
    run_bench(out, "jobs", "--backends", "kafka-cassandra", env=env, timeout=780)
    check_jobs(out, "kafka-cassandra")


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(300)
def test_spark_scenario_measures_the_shared_session(tmp_path: Path) -> None:
    out = tmp_path / "results"
    run_bench(out, "spark", timeout=280)
    rows = results(out, ("spark",))["spark"]["rows"]
    assert rows[0]["median_s"] > 0


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(480)
def test_pipeline_scenario_times_the_example_through_the_scheduler_and_plainly(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results"
    output = run_bench(out, "pipeline", timeout=460)
    document = results(out, ("pipeline",))["pipeline"]
    through, plain = document["rows"]
    assert through["seconds"] > 0 and plain["seconds"] > 0
    assert through["ratio_to_plain"] == pytest.approx(through["seconds"] / plain["seconds"])
    assert document["details"]["events_per_hour"] == 50
    assert "through the scheduler" in output and "plain SparkSession" in output


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.timeout(480)
def test_every_distributed_scenario_writes_sane_json(tmp_path: Path) -> None:
    env = servers_env()
    out = tmp_path / "results"
    # spark, pipeline, peer and jobs have tests of their own; so has schedules on these
    # backends (`schedules --backends kafka-cassandra --smoke`, the very command `all` would
    # run, with more checked); rebalance, which the versus test on these backends runs once for
    # each side (`bench rebalance --backends kafka-cassandra --smoke`) and checks as this test
    # did; and persist and execute, which the settings-file test below runs on these backends
    # (`persist` and `execute --backends kafka-cassandra --smoke`, on the secured node) and
    # checks as this test did, and more. api on them runs here only.
    run_bench(
        out,
        "all",
        "--backends",
        "kafka-cassandra",
        "--skip",
        "spark,pipeline,peer,jobs,schedules,rebalance,persist,execute",
        env=env,
        timeout=460,
    )
    documents = results(out, DISTRIBUTED_SCENARIOS)
    enqueue = {row["side"]: row for row in documents["enqueue"]["rows"]}
    # Raw produce encoding each task: what schedule_task would be without its future per task.
    assert enqueue["raw produce, each task encoded"]["tasks_per_s"] > 0
    assert enqueue["raw produce + callback"]["ratio_to_raw"] == 1
    # The documented keyword call, measured beside the positional baseline.
    assert enqueue["raw produce, keyword arguments"]["ratio_to_raw"] > 0
    reload = {row["side"]: row for row in documents["reload"]["rows"]}
    from_start = reload["from the bucket start, in slices"]
    assert from_start["tombstones_read"] >= 1000
    assert from_start["most_in_one_query"] < from_start["tombstones_read"]  # spread over spans
    assert reload["from the reload mark"]["tombstones_read"] == 0


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.timeout(480)
def test_the_workers_a_bench_starts_read_its_settings_file(tmp_path: Path) -> None:
    """Cassandra's login and TLS given only in `--config`'s file (the secured node refuses any
    client without them): the bench itself, the worker it runs in-process (persist) and the
    worker subprocesses it starts (execute) must all read that file."""
    from tests.servers import kafka_bootstrap, secured_cassandra, secured_cassandra_role

    node, role = secured_cassandra(), secured_cassandra_role()
    config = tmp_path / "scheduler.toml"
    settings = {
        "kafka_bootstrap": kafka_bootstrap(),
        "cassandra_hosts": ",".join(f"{host}:{node.port}" for host in node.hosts),
        "cassandra_username": role.username,
        "cassandra_password": role.password,
        "cassandra_tls_ca_file": str(node.tls.ca),
        "cassandra_tls_cert_file": str(node.tls.client_cert),
        "cassandra_tls_key_file": str(node.tls.client_key),
    }
    config.write_text(
        "".join(f"{name} = {json.dumps(value)}\n" for name, value in settings.items())
    )
    out = tmp_path / "results"
    for scenario in ("persist", "execute"):
        run_bench(out, scenario, "--backends", "kafka-cassandra", config=config, timeout=220)
    documents = results(out, ("persist", "execute"))
    persist_sides = [row["side"] for row in documents["persist"]["rows"]]
    assert "worker (Kafka -> Cassandra)" in persist_sides
    # A worker subprocess that cannot log in exits; the scenario then notes the failure.
    assert [row["workers"] for row in documents["execute"]["rows"]] == ["1 worker", "2 workers"]
    assert not [note for note in documents["execute"]["notes"] if "failed" in note]


def test_enqueue_compares_records_of_the_size_asked_for(tmp_path: Path) -> None:
    """`--data-bytes` gives every task that much text, and the raw side the very same bytes."""
    from scheduler.bench.enqueue import make_tasks, records_of
    from scheduler.codec import encode_schedule

    tasks = make_tasks(3, due_ms=1_800_000_000_000, data_bytes=500)
    assert [len(task.data["text"]) for task in tasks] == [500, 500, 500]
    assert len({task.data["text"] for task in tasks}) == 3  # each task its own text
    written = [encode_schedule(task.key, task.data, 1 << 20) for task in tasks]
    assert [value for _, value in records_of(tasks)] == written

    out = tmp_path / "results"
    output = run_bench(out, "enqueue", "--data-bytes", "500", timeout=220)
    document = results(out, ("enqueue",))["enqueue"]
    assert document["details"]["data_bytes"] == 500
    assert document["details"]["record_bytes"] == len(written[0])
    assert f"records of {len(written[0])} bytes" in output


@pytest.mark.timeout(240)
def test_the_schedules_scenario_starts_every_fired_and_triggered_run_beside_apscheduler(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results"
    run_bench(out, "schedules", "--size", "30", "--enabled", "300", timeout=220)
    document = results(out, ("schedules",))["schedules"]
    ours, peer, partition, status, rss = document["rows"]
    assert ours["schedules"] == ours["started"] == 30, ours
    assert peer["schedules"] == peer["started"] == 30, peer
    assert 0 <= ours["p50_ms"] <= ours["p99_ms"] <= ours["max_ms"], ours
    for trigger in (partition, status):  # each event launched its run
        assert trigger["started"] == 5 and 0 <= trigger["p50_ms"] <= trigger["p99_ms"], trigger
    assert document["details"]["rss_loaded"]["rss_peak_mb"] > 0
    assert rss["schedules"] == 300 and rss["rss_idle_peak_mb"] > 0, rss
    assert not any("must be all" in note for note in document["notes"])


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.timeout(420)
def test_the_schedules_scenario_measures_the_shared_fire_and_event_to_launch_on_kafka_and_cassandra(
    tmp_path: Path,
) -> None:
    env = servers_env()
    out = tmp_path / "results"
    run_bench(out, "schedules", "--backends", "kafka-cassandra", env=env, timeout=400)
    document = results(out, ("schedules",))["schedules"]
    assert not any("failed" in note for note in document["notes"]), document["notes"]
    assert not any("must be all" in note for note in document["notes"]), document["notes"]
    rows = {row["side"]: row for row in document["rows"]}
    fire = rows.pop("ours on kafka-cassandra")
    assert fire["schedules"] == fire["started"] == 20, fire  # every fired run started
    assert 0 <= fire["p50_ms"] <= fire["p99_ms"] <= fire["max_ms"], fire
    assert set(rows) == {
        "ours on kafka-cassandra, partition trigger: event -> launch",
        "ours on kafka-cassandra, program-status trigger: event -> launch",
    }, rows
    for trigger in rows.values():  # each event launched its run, after it
        assert trigger["started"] == 5 and 0 <= trigger["p50_ms"] <= trigger["p99_ms"], trigger


@pytest.mark.timeout(360)
def test_the_api_scenario_measures_each_listing_and_the_batch_post(tmp_path: Path) -> None:
    out = tmp_path / "results"
    run_bench(out, "api", "--size", "3000", timeout=340)
    document = results(out, ("api",))["api"]
    rows = {row["case"]: row for row in document["rows"]}
    listings = [case for case in rows if case.startswith("GET ")]
    assert len(listings) == 4, rows
    for case in listings:
        assert rows[case]["requests"] > 0 and rows[case]["per_s"] > 0, rows[case]
    assert rows["GET tasks, every partition, next_cursor"]["rows"] == 3000
    assert rows["GET schedules, by name, after"]["rows"] == 300
    post, direct = (rows[c] for c in rows if not c.startswith("GET "))
    assert post["tasks_per_s"] > 0 and direct["tasks_per_s"] > 0
    assert direct["ratio"] > 0
    details = document["details"]["embedded"]
    assert details["tasks"] == 3000 and details["schedules"] == 300
