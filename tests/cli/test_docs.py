"""The committed settings reference is the generated one."""

from __future__ import annotations

from pathlib import Path

from scheduler.cli.docs import render_markdown
from scheduler.settings import Settings, env_name

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_docs_configuration_md_equals_the_generated_reference(run):
    generated = run("settings", "docs").output
    assert generated == render_markdown()
    assert DOCS.read_text(encoding="utf-8") == generated, (
        "docs/configuration.md is stale; run `scheduler settings docs > docs/configuration.md`"
    )


def test_every_setting_has_a_description_and_is_documented():
    page = render_markdown()
    for name, field in Settings.model_fields.items():
        assert field.description, f"setting {name} has no docstring"
        assert f"### `{name}`" in page and env_name(name) in page
