"""The package's import contracts (pyproject.toml, `[tool.importlinter]`): the layers, the
composition root imported by nothing below it, and no import cycles between packages."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
from importlinter import configuration
from importlinter.application import use_cases

configuration.configure()  # what the `lint-imports` command does first

PYPROJECT = str(Path(__file__).resolve().parents[1] / "pyproject.toml")


def _lint(contract: str | None = None) -> bool:
    limit = () if contract is None else (contract,)
    return use_cases.lint_imports(
        config_filename=PYPROJECT,
        limit_to_contracts=limit,
        cache_dir=None,
        no_logo=True,
        is_debug_mode=True,
    )


@pytest.fixture
def with_import(monkeypatch: pytest.MonkeyPatch):
    """Lint as if the package also held the import given (importer, imported)."""

    def add(importer: str, imported: str) -> None:
        build = use_cases._build_graph

        def build_with_import(*args, **kwargs) -> grimp.ImportGraph:
            graph = build(*args, **kwargs)
            graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="")
            return graph

        monkeypatch.setattr(use_cases, "_build_graph", build_with_import)

    return add


def test_the_package_keeps_every_import_contract() -> None:
    assert _lint() is True


def test_a_store_importing_the_engine_breaks_the_layers(with_import) -> None:
    with_import("scheduler.stores.sqlite", "scheduler.engine.clock")
    assert _lint("layers") is False


def test_the_client_importing_the_composition_root_breaks_its_contract(with_import) -> None:
    with_import("scheduler.client", "scheduler.runtime")
    assert _lint("root") is False


def test_a_cycle_between_two_packages_breaks_the_acyclic_contract(with_import) -> None:
    # The executors' factory imports its adapters; an adapter importing the CLI back closes a
    # cycle executors -> cli -> executors.
    with_import("scheduler.executors.command", "scheduler.cli.output")
    assert _lint("acyclic") is False
