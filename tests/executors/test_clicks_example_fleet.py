"""The example on a fleet of workers (`scheduler example run --fleet`, docker/example.yml): the
programs file its workers read, and the mode refused where there is no fleet. The whole run, on
two compose workers, is tests/services/test_compose.py's containers test."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from scheduler.cli.main import cli
from scheduler.errors import ConfigurationError
from scheduler.examples.clicks.run import example_day, example_programs, main
from scheduler.programs.catalog import load_programs
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
