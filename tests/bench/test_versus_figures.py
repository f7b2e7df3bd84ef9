"""What `bench versus` counts and calls worse, without running anything."""

from __future__ import annotations

from pathlib import Path

from scheduler.bench.lines import AREAS, TOTAL, checkout_of, count_checkout, count_source
from scheduler.bench.versus import worse
from scheduler.bench.versus_runs import HIGHER, LOWER

SOURCE = '''"""A module docstring
over two lines."""

import os  # a trailing comment counts as code


# a comment line
def f(
    x: int,
) -> str:
    """One line of docstring."""
    text = """a string that is
    not a docstring"""
    return text
'''


def test_code_lines_leave_out_blank_comment_and_docstring_lines() -> None:
    physical, code = count_source(SOURCE)
    assert physical == 14
    assert code == 7  # import, the def's three lines, the two string lines, the return


def test_every_area_is_counted_and_a_missing_one_counts_zero(tmp_path: Path) -> None:
    engine = tmp_path / "scheduler" / "engine"
    engine.mkdir(parents=True)
    (engine / "a.py").write_text(SOURCE, encoding="utf-8")
    (tmp_path / "scheduler" / "worker.py").write_text("x = 1\n\n", encoding="utf-8")
    counts = count_checkout(tmp_path)
    assert set(counts) == {*AREAS, TOTAL}
    assert counts["scheduler/engine"] == {"files": 1, "lines": 14, "code": 7}
    assert counts["scheduler/worker.py"] == {"files": 1, "lines": 2, "code": 1}
    assert counts["scheduler/stores"] == {"files": 0, "lines": 0, "code": 0}
    assert counts[TOTAL] == {"files": 2, "lines": 16, "code": 8}


def test_the_checkout_of_a_venv_python_is_the_directory_above_the_venv(tmp_path: Path) -> None:
    python = tmp_path / "base" / ".venv" / "bin" / "python"
    assert checkout_of(python) == tmp_path / "base"
    assert checkout_of(tmp_path) == tmp_path
    assert checkout_of(Path("/usr/bin/python3")) is None


def test_a_figure_is_worse_only_beyond_the_noise_and_every_run_of_the_baseline() -> None:
    assert worse([80.0, 82.0], [100.0, 101.0], HIGHER)
    assert not worse([95.0], [100.0], HIGHER)  # within 10 %
    assert not worse([80.0, 102.0, 81.0], [100.0, 101.0, 99.0], HIGHER)  # the runs overlap
    assert worse([130.0], [100.0], LOWER)
    assert not worse([70.0], [100.0], LOWER)  # lower is better here
    assert not worse([float("nan")], [100.0], LOWER)
    assert worse([130.0, float("nan")], [100.0], LOWER)  # a run that measured nothing is left out
    assert worse([101.0], [100.0], LOWER, noise=0.0)  # a count: one line more is more
