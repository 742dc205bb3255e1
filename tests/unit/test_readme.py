"""The README stays true: every setting is documented, and its test command is CI's."""

from __future__ import annotations

from pathlib import Path

from condensate.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_every_setting_is_documented():
    """Each CONDENSATE_* variable the settings read appears in the README's table."""
    names = [
        f"CONDENSATE_{name.upper()}"
        for name, field in Settings.model_fields.items()
        if field.validation_alias is None or "CONDENSATE" in str(field.validation_alias)
    ]
    missing = [n for n in names if f"`{n}`" not in README]
    assert missing == []


def test_ci_runs_the_readme_test_command():
    """.ci/run calls scripts/test, the command the README gives for running the tests."""
    assert "scripts/test" in README
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()
