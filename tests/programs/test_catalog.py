"""Programs files, and what a program's run hands its executor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.errors import ConfigurationError
from scheduler.programs.catalog import load_programs
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
