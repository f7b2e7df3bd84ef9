"""docs/api.md is what `scheduler api docs` prints from the OpenAPI document."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from scheduler.api.app import create_app
from scheduler.cli.main import cli
from scheduler.settings import Settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_docs_api_md_equals_the_generated_reference() -> None:
    printed = CliRunner().invoke(cli, ["api", "docs"], catch_exceptions=False).output
    stale = "docs/api.md is stale; run `scheduler api docs > docs/api.md`"
    assert printed == DOCS.read_text(), stale


def test_the_reference_names_each_route_with_its_role() -> None:
    text = DOCS.read_text()
    assert "### `POST /api/v1/tasks/drop`: Drop failed tasks\n\nRole: **admin**." in text
    assert "### `GET /api/v1/tasks`: List tasks\n\nRole: **read**." in text
    assert "### `GET /api/v1/health`: Health\n\nNo token needed." in text


def test_the_openapi_document_declares_400_never_422() -> None:
    document = create_app(Settings.model_construct()).openapi()
    codes = {
        code
        for operations in document["paths"].values()
        for operation in operations.values()
        for code in operation["responses"]
    }
    assert "422" not in codes and "400" in codes
    assert "HTTPValidationError" not in document["components"]["schemas"]
