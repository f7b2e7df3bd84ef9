"""The example on a fleet of workers (`scheduler example run --fleet`, docker/example.yml): the
programs file its workers read, the mode refused where there is no fleet, and the runs it
follows. The whole run, on two compose workers, is tests/services/test_compose.py's containers
test."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from scheduler.cli.main import cli
from scheduler.errors import ConfigurationError
from scheduler.examples.clicks.run import (
    CLEAN_PROGRAM,
    REPORT_PROGRAM,
    ROLLUP_PROGRAM,
    ExampleRunFailedError,
    example_day,
    example_programs,
    main,
    watch_runs,
)
from scheduler.programs.catalog import load_programs
from scheduler.programs.model import Run, RunStatus, StartedBy, StarterKind
from scheduler.settings import Settings


def test_the_programs_file_holds_the_examples_programs_for_the_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SCHEDULER_DATA_DIR", "shared")
    file = tmp_path / "example" / "programs.json"

    written = CliRunner().invoke(cli, ["example", "programs", str(file)], catch_exceptions=False)

    assert written.exit_code == 0, written.output
    assert f"wrote the example's programs to {file}" in written.output
    root = tmp_path / "shared" / "example" / "clicks"
    expected = example_programs(example_day(), root / "data", root / "out")
    assert load_programs(file).programs() == sorted(expected, key=lambda p: p.name)
    assert [p.name for p in file.parent.iterdir()] == ["programs.json"], "no partial file left"


def test_the_fleet_mode_is_refused_on_the_embedded_backends(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, executor="spark")
    with pytest.raises(ConfigurationError, match=r"only on Kafka and Cassandra.*without --fleet"):
        main(settings, fleet=True)
    assert not (tmp_path / "example" / "clicks" / "data").exists(), "refused before any input"


class ListedRuns:
    """The one read of a run store `watch_runs` makes, over a fixed list."""

    def __init__(self, runs: list[Run]) -> None:
        self.runs = runs

    def list_runs(self, *, program: str, limit: int) -> list[Run]:
        return [run for run in self.runs if run.program == program][:limit]


SINCE_MS = 1_700_000_000_000


def a_run(run_id: str, program: str, request_key: str, status: RunStatus) -> Run:
    return Run(
        run_id=run_id,
        program=program,
        started_by=StartedBy(StarterKind.SCHEDULE, "clicks"),
        arguments={},
        status=status,
        created_ms=SINCE_MS + 1,
        requested_ms=SINCE_MS + 1,
        request_key=request_key,
    )


def the_day(hourly_status: RunStatus = RunStatus.COMPLETED) -> list[Run]:
    """The backfill's 24 hourly runs (the first with `hourly_status`), the rollup, the report."""
    return [
        *(
            a_run(
                f"hour-{hour}",
                CLEAN_PROGRAM,
                f"schedule:clicks-hourly@{hour:02d}:05/backfill-{SINCE_MS}",
                hourly_status if hour == 0 else RunStatus.COMPLETED,
            )
            for hour in range(24)
        ),
        a_run("rollup", ROLLUP_PROGRAM, "schedule:clicks-daily@x", RunStatus.COMPLETED),
        a_run("report", REPORT_PROGRAM, "schedule:clicks-report@x", RunStatus.COMPLETED),
    ]


def test_a_live_hourly_fire_while_the_example_runs_is_not_the_examples_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Past five past an hour the hourly schedule fires by itself and cleans an hour of today,
    which has no input: that run fails, and the example, about yesterday, goes on."""
    live = a_run("live", CLEAN_PROGRAM, "schedule:clicks-hourly@today", RunStatus.FAILED)

    watch_runs(ListedRuns([*the_day(), live]), SINCE_MS, timeout_s=5, worker=None)

    assert "clicks-clean: 24 COMPLETED" in capsys.readouterr().out


def test_a_failed_run_of_the_backfill_still_fails_the_example() -> None:
    with pytest.raises(ExampleRunFailedError, match="run hour-0 of clicks-clean failed"):
        watch_runs(ListedRuns(the_day(RunStatus.FAILED)), SINCE_MS, timeout_s=5, worker=None)
