"""Programs files, and what a program's run hands its executor."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from scheduler.errors import ConfigurationError, UnknownProgramError
from scheduler.programs.catalog import ProgramsFile, load_programs
from scheduler.programs.model import Program, ProgramKind

TOML = """
[programs.clean]
kind = "command"
argv = ["clean", "--table", "{{table}}"]
properties = {table = "clicks"}
description = "cleans"

[programs.rollup]
kind = "spark"
job = "jobs:rollup"
args = {depth = 2}

[programs.report]
kind = "spark-submit"
application = "/opt/report.py"
args = ["--day", "{{day}}", "--fixed"]
"""


def test_a_toml_programs_file_declares_every_kind(tmp_path: Path) -> None:
    path = tmp_path / "programs.toml"
    path.write_text(TOML)
    catalog = load_programs(path)
    assert catalog.names() == ["clean", "report", "rollup"]
    clean = catalog.get("clean")
    assert (clean.kind, clean.properties, clean.description) == (
        ProgramKind.COMMAND,
        {"table": "clicks"},
        "cleans",
    )
    assert clean.spec == {"argv": ["clean", "--table", "{{table}}"]}


def test_a_json_programs_file_is_read_the_same(tmp_path: Path) -> None:
    path = tmp_path / "programs.json"
    path.write_text(json.dumps({"programs": {"rollup": {"kind": "spark", "job": "jobs:rollup"}}}))
    assert load_programs(path).get("rollup").spec == {"job": "jobs:rollup"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[programs.x]\nkind = "shell"',
            r"program 'x' has kind 'shell'; use one of spark, spark-submit, command",
        ),
        (
            '[programs.x]\ntype = "command"\nargv = ["ls"]',
            r"program 'x' has no `kind` \(`type` names one: the field is `kind`\); add kind = "
            r"one of spark, spark-submit, command",
        ),
        ('[programs.x]\nargv = ["ls"]', r"program 'x' has no `kind`; add kind = one of"),
        ('[programs.x]\nkind = "spark"', r"program 'x' of kind spark needs 'job'"),
        (
            '[programs.x]\nkind = "command"\nargv = "ls -l"',
            r"argv must be a non-empty list of strings",
        ),
        (
            '[programs.x]\nkind = "command"\nargv = ["ls"]\nproperties = 3',
            r"properties must be a table",
        ),
        ("[other]\nx = 1", r"has no `programs` table"),
        ("[programs", r"does not parse"),
    ],
)
def test_a_wrong_programs_file_is_refused_naming_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "programs.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        load_programs(path)


def test_a_missing_programs_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="SCHEDULER_PROGRAMS_FILE"):
        load_programs(tmp_path / "nope.toml")


def _edit(path: Path, text: str) -> None:
    """Write `text` so the file reads as changed even within the file system's time grain."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))


def test_a_programs_file_is_read_again_when_it_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler.programs.catalog")
    path = tmp_path / "programs.toml"
    path.write_text(TOML)
    catalog = ProgramsFile(path)
    catalog.RECHECK_S = 0.0
    with pytest.raises(UnknownProgramError, match="known programs: clean, report, rollup"):
        catalog.get("late")
    _edit(path, TOML + '\n[programs.late]\nkind = "command"\nargv = ["true"]\n')
    assert catalog.get("late").spec == {"argv": ["true"]}  # declared after the worker started
    assert "late" in caplog.text

    # A broken edit keeps the last good programs, and says so once.
    _edit(path, "[programs")
    caplog.clear()
    assert catalog.get("late").kind is ProgramKind.COMMAND
    assert catalog.names() == ["clean", "late", "report", "rollup"]
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "does not parse" in errors[0].getMessage()
    assert "keeping the programs read before" in errors[0].getMessage()


def test_programs_registered_in_python_stay_across_reloads_and_win(tmp_path: Path) -> None:
    path = tmp_path / "programs.toml"
    path.write_text(TOML)
    catalog = ProgramsFile(path)
    catalog.RECHECK_S = 0.0
    mine = Program("clean", ProgramKind.COMMAND, {"argv": ["mine"]}, {})
    catalog.register(mine)
    catalog.register(Program("extra", ProgramKind.COMMAND, {"argv": ["extra"]}, {}))
    _edit(path, '[programs.clean]\nkind = "command"\nargv = ["theirs"]\n')
    assert catalog.get("clean") == mine
    assert catalog.names() == ["clean", "extra"]  # rollup and report were removed from the file


def test_a_missing_name_looks_at_the_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "programs.toml"
    path.write_text(TOML)
    catalog = ProgramsFile(path)  # RECHECK_S as shipped: a second between looks
    assert catalog.get("clean")
    _edit(path, TOML + '\n[programs.late]\nkind = "command"\nargv = ["true"]\n')
    assert catalog.get("late").spec == {"argv": ["true"]}


def test_a_programs_file_that_does_not_read_at_first_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "programs.toml"
    path.write_text("[programs")
    with pytest.raises(ConfigurationError, match="does not parse"):
        ProgramsFile(path)


def test_each_kind_gets_the_run_arguments_its_executor_takes() -> None:
    arguments = {"table": "views", "day": "2026-01-01", "_trigger": {"run": "r1"}, "n": 3}
    command = Program("c", ProgramKind.COMMAND, {"argv": ["x", "{{table}}"]}, {})
    assert command.task_data(arguments) == {
        "executor": "command",
        "argv": ["x", "{{table}}"],
        "vars": {"table": "views", "day": "2026-01-01", "_trigger": '{"run": "r1"}', "n": "3"},
    }
    spark = Program("s", ProgramKind.SPARK, {"job": "jobs:rollup", "args": {"depth": 2}}, {})
    assert spark.task_data({"day": "d"}) == {
        "executor": "spark",
        "job": "jobs:rollup",
        "args": {"depth": 2, "day": "d"},
    }
    submit = Program(
        "r", ProgramKind.SPARK_SUBMIT, {"application": "a.py", "args": ["--day", "{{day}}"]}, {}
    )
    assert submit.task_data(arguments) == {
        "executor": "spark-submit",
        "application": "a.py",
        "args": ["--day", "2026-01-01"],
    }
